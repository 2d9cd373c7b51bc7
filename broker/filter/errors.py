"""Message filter errors.

    FilterError                        base of everything raised by shoal.broker.filter
     +-- FilterSyntaxError             an expression RocketMQ's SelectorParser refuses (-> SUBSCRIPTION_PARSE_FAILED)
     |    +-- FilterTooComplexError    longer or deeper than shoal.broker.filter.limits allows
     +-- UnsupportedExpressionTypeError  neither TAG nor SQL92 (-> SUBSCRIPTION_PARSE_FAILED)
     +-- FilterEvaluationError         where RocketMQ's evaluator throws (a property that is no number, ...):
                                       the message does not match; raised only by `Sql92Filter.evaluate`

Expected refusals map to a RocketMQ ResponseCode in `RESPONSE_CODE_OF_ERROR`; processors call
`shoal.broker.filter.check_subscription`, which applies it.
"""

from __future__ import annotations

from shoal.protocol import ResponseCode


class FilterError(Exception):
    """Base of every error raised by shoal.broker.filter."""


class FilterSyntaxError(FilterError):
    """The expression does not parse, or RocketMQ refuses it while building it (e.g. `a > 'x'`)."""

    def __init__(self, expression: str, reason: str, position: int | None = None) -> None:
        where = f" at character {position}" if position is not None else ""
        super().__init__(f"Invalid MessageSelector{where}: {reason} (expression: {expression[:200]!r})")
        self.expression = expression
        self.reason = reason
        self.position = position


class FilterTooComplexError(FilterSyntaxError):
    """The expression exceeds a limit of shoal.broker.filter.limits."""


class UnsupportedExpressionTypeError(FilterError):
    """A subscription whose expressionType the broker has no filter for."""

    def __init__(self, expression_type: str) -> None:
        super().__init__(f"unsupported expression type {expression_type!r} (TAG and SQL92 are)")
        self.expression_type = expression_type


class FilterEvaluationError(FilterError):
    """RocketMQ's evaluator throws here (its broker then treats the message as not matching)."""


RESPONSE_CODE_OF_ERROR: dict[type[FilterError], int] = {
    FilterSyntaxError: ResponseCode.SUBSCRIPTION_PARSE_FAILED,
    FilterTooComplexError: ResponseCode.SUBSCRIPTION_PARSE_FAILED,
    UnsupportedExpressionTypeError: ResponseCode.SUBSCRIPTION_PARSE_FAILED,
}
