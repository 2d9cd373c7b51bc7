"""v2 `Status` values and how remoting response codes read as them."""

from __future__ import annotations

from shoal.protocol import ResponseCode
from shoal.protocol.v2 import definition_pb2 as v2

OK_MESSAGE = "OK"

_CODE_OF_RESPONSE: dict[int, int] = {
    ResponseCode.SUCCESS: v2.OK,
    ResponseCode.TOPIC_NOT_EXIST: v2.TOPIC_NOT_FOUND,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: v2.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.NO_PERMISSION: v2.FORBIDDEN,
    ResponseCode.MESSAGE_ILLEGAL: v2.BAD_REQUEST,
    ResponseCode.INVALID_PARAMETER: v2.BAD_REQUEST,
    ResponseCode.SUBSCRIPTION_PARSE_FAILED: v2.ILLEGAL_FILTER_EXPRESSION,
    ResponseCode.FLUSH_DISK_TIMEOUT: v2.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: v2.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: v2.HA_NOT_AVAILABLE,
    ResponseCode.SERVICE_NOT_AVAILABLE: v2.INTERNAL_SERVER_ERROR,
    ResponseCode.SYSTEM_BUSY: v2.TOO_MANY_REQUESTS,
    ResponseCode.NO_MESSAGE: v2.INVALID_RECEIPT_HANDLE,
    ResponseCode.POLLING_TIMEOUT: v2.MESSAGE_NOT_FOUND,
}


def status(code: int = v2.OK, message: str = OK_MESSAGE) -> v2.Status:
    return v2.Status(code=code, message=message)  # type: ignore[arg-type]


def code_of_response(code: int) -> int:
    """The v2 code of a broker's remoting response code (INTERNAL_SERVER_ERROR when unknown)."""
    return _CODE_OF_RESPONSE.get(code, v2.INTERNAL_SERVER_ERROR)
