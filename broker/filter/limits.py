"""Bounds of the broker's message filters (SQL92 property filters), with units, in one place.

RocketMQ sets none: a hostile expression there can exhaust the JVM stack, which its parser turns into
a parse failure. Shoal refuses such expressions up front with SUBSCRIPTION_PARSE_FAILED instead, at
sizes no hand-written or generated filter comes near.
"""

from __future__ import annotations

SQL92_EXPRESSION_MAX_CHARS = 64 * 1024  # a filter longer than this is refused before it is read
SQL92_NESTING_MAX_COUNT = 64  # parentheses and prefix operators (NOT, -, +) open at once
SQL92_TREE_DEPTH_MAX_COUNT = 128  # nodes on the deepest path of the compiled tree (AND/OR chains are flat)

assert SQL92_NESTING_MAX_COUNT < SQL92_TREE_DEPTH_MAX_COUNT
# Each nesting level costs the parser about seven Python frames and each tree level the evaluator two:
# both stay far below the interpreter's default recursion limit of 1000.
assert SQL92_NESTING_MAX_COUNT * 7 < 1000 // 2
assert SQL92_TREE_DEPTH_MAX_COUNT * 2 < 1000 // 2

SQL92_SCAN_UNITS_MAX_COUNT = 800
"""ConsumeQueue units one pull reads past without a SQL92 match before it answers NO_MATCHED_MESSAGE
(the client pulls again at once from where it stopped): RocketMQ's 16000 bytes of ConsumeQueue
(maxFilterMessageCount) are 800 units."""
CONSUMER_FILTERS_MAX_COUNT = 100_000
"""(topic, group) SQL92 filters held at once; beyond it a new one is not registered (its pulls get
FILTER_DATA_NOT_EXIST, as RocketMQ answers for a filter it could not register)."""
