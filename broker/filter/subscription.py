"""What the broker's processors ask of a subscription's expression: is it a tag list, does it compile,
and which ResponseCode refuses it (CHECK_CLIENT_CONFIG's rules in RocketMQ 4.9.7's ClientManageProcessor).
"""

from __future__ import annotations

from dataclasses import dataclass

from shoal.broker.filter.errors import RESPONSE_CODE_OF_ERROR, FilterError, UnsupportedExpressionTypeError
from shoal.broker.filter.sql92 import Sql92Filter, compile_sql92
from shoal.formats.java_hash import java_string_hash
from shoal.protocol import ResponseCode

__all__ = [
    "EXPRESSION_TYPE_SQL92",
    "EXPRESSION_TYPE_TAG",
    "SubscriptionCheck",
    "check_subscription",
    "compile_filter",
    "is_tag_type",
    "parse_subscription",
]

EXPRESSION_TYPE_TAG = "TAG"  # org.apache.rocketmq.common.filter.ExpressionType
EXPRESSION_TYPE_SQL92 = "SQL92"


def is_tag_type(expression_type: str | None) -> bool:
    """ExpressionType.isTagType: absent, empty or "TAG"."""
    return expression_type in (None, "", EXPRESSION_TYPE_TAG)


def compile_filter(expression_type: str | None, expression: str | None) -> Sql92Filter | None:
    """The compiled filter of a subscription; None for a tag subscription (filtered by tag hash codes).

    Raises FilterSyntaxError (an empty or missing SQL92 expression included) or
    UnsupportedExpressionTypeError.
    """
    if is_tag_type(expression_type):
        return None
    if expression_type != EXPRESSION_TYPE_SQL92:
        raise UnsupportedExpressionTypeError(str(expression_type))
    return compile_sql92(expression or "")


@dataclass(frozen=True)
class SubscriptionCheck:
    """The answer for one subscription: SUCCESS with its filter (None for tags), or a refusal."""

    code: int
    remark: str | None
    filter: Sql92Filter | None = None

    @property
    def ok(self) -> bool:
        return self.code == ResponseCode.SUCCESS


def check_subscription(
    expression_type: str | None, expression: str | None, *, property_filter_enabled: bool
) -> SubscriptionCheck:
    """CHECK_CLIENT_CONFIG's verdict: tags pass; SQL92 needs enablePropertyFilter and must compile."""
    if is_tag_type(expression_type):
        return SubscriptionCheck(ResponseCode.SUCCESS, None)
    if not property_filter_enabled:
        return SubscriptionCheck(
            ResponseCode.SYSTEM_ERROR, f"The broker does not support consumer to filter message by {expression_type}"
        )
    try:
        compiled = compile_filter(expression_type, expression)
    except FilterError as error:
        return SubscriptionCheck(RESPONSE_CODE_OF_ERROR[type(error)], str(error))
    return SubscriptionCheck(ResponseCode.SUCCESS, None, compiled)


def parse_subscription(expression: str | None) -> frozenset[int] | None:
    """Tag codes of a TAG expression (`A || B`); None means every message (`*` or empty)."""
    if expression is None:
        return None
    tags = [tag.strip() for tag in expression.split("||")]
    tags = [tag for tag in tags if tag]
    if not tags or "*" in tags:
        return None
    return frozenset(java_string_hash(tag) for tag in tags)
