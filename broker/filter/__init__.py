"""shoal.broker.filter: RocketMQ 4.9.7's SQL92 property filter (`MessageSelector.bySql`,
broker.conf `enablePropertyFilter`), pure: an expression compiles once into a `Sql92Filter` whose
`matches(properties)` says whether a message is delivered. `check_subscription` gives the processors
the ResponseCode for a subscription's expression; `ConsumerFilterTable` keeps each group's compiled
filter from its heartbeats, and `message_filter_for` builds what one pull delivers (`MessageFilter`).
"""

from shoal.broker.filter.consumer_filters import ConsumerFilter, ConsumerFilterTable, SubscriptionEntry
from shoal.broker.filter.errors import (
    RESPONSE_CODE_OF_ERROR,
    FilterError,
    FilterEvaluationError,
    FilterSyntaxError,
    FilterTooComplexError,
    UnsupportedExpressionTypeError,
)
from shoal.broker.filter.message_filter import MessageFilter, keep_matching, message_filter_for
from shoal.broker.filter.sql92 import Sql92Filter, compile_sql92
from shoal.broker.filter.subscription import (
    EXPRESSION_TYPE_SQL92,
    EXPRESSION_TYPE_TAG,
    SubscriptionCheck,
    check_subscription,
    compile_filter,
    is_tag_type,
    parse_subscription,
)

__all__ = [
    "EXPRESSION_TYPE_SQL92",
    "EXPRESSION_TYPE_TAG",
    "RESPONSE_CODE_OF_ERROR",
    "ConsumerFilter",
    "ConsumerFilterTable",
    "FilterError",
    "FilterEvaluationError",
    "FilterSyntaxError",
    "FilterTooComplexError",
    "MessageFilter",
    "Sql92Filter",
    "SubscriptionCheck",
    "SubscriptionEntry",
    "UnsupportedExpressionTypeError",
    "check_subscription",
    "compile_filter",
    "compile_sql92",
    "is_tag_type",
    "keep_matching",
    "message_filter_for",
    "parse_subscription",
]
