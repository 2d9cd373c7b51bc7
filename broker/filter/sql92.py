"""RocketMQ 4.9.7's SQL92 property filter (`MessageSelector.bySql`): parse once, evaluate per message.

The grammar and the semantics are those of org.apache.rocketmq.filter (SelectorParser.jj and the
expression classes, themselves trimmed from ActiveMQ's JMS selectors), including their quirks:

Tokens (keywords case-insensitive, identifiers case-sensitive, ASCII only)::

    keywords   NOT AND OR BETWEEN IN TRUE FALSE NULL IS
    integer    0 | [1-9][0-9]*[lL]?          Integer if it fits 32 bits, else Long; beyond Long: error
    float      1.5  1.  .5  1.5E3  1E3       Double; one that is infinite or 0.0 is an error
    string     'it''s'                        '' is a quote
    identifier [A-Za-z_$][A-Za-z0-9_$]*       a message property (TAGS, KEYS and user properties alike)
    operators  = <> < <= > >= ( , ) + -
    skipped    space \\t \\n \\r \\f, -- comment ended by a line break, /* comment */

Grammar (loosest first; no hex, octal, LIKE, arithmetic, CONTAINS/STARTSWITH/ENDSWITH: those came in 5.x)::

    selector   := or                                     anything after it is ignored (no <EOF> rule)
    or         := and (OR and)*
    and        := equality (AND equality)*
    equality   := comparison (= comparison | <> comparison | IS NULL | IS NOT NULL)*
    comparison := unary (> unary | >= unary | < unary | <= unary
                         | [NOT] BETWEEN unary AND unary | [NOT] IN (string, ...))*
    unary      := + unary | - unary | NOT unary | literal | identifier | ( or )

NOT is a prefix of `unary`, so it binds tighter than any comparison: `NOT a = 'x'` is `(NOT a) = 'x'`.

Values are Java's: a property is a String or null, constants are Integer, Long, Double, String or
Boolean. The three-valued logic has null for unknown, and a fourth outcome, "throws", where RocketMQ's
evaluator raises (a property compared with a number that is not a number of that type): the broker
then skips the message, whatever OR or NOT surround the failing comparison. A message matches only
when the expression is TRUE. `Sql92Filter.evaluate` reports null as None and raising as
FilterEvaluationError; `Sql92Filter.matches` is what the broker uses.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from shoal.broker.filter.errors import FilterEvaluationError, FilterSyntaxError, FilterTooComplexError
from shoal.broker.filter.limits import (
    SQL92_EXPRESSION_MAX_CHARS,
    SQL92_NESTING_MAX_COUNT,
    SQL92_TREE_DEPTH_MAX_COUNT,
)
from shoal.broker.filter.values import (
    Long,
    Value,
    compare_numbers,
    compare_values,
    java_parse_double,
)

__all__ = ["Sql92Filter", "compile_sql92"]

INTEGER_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
DOUBLE_MAX = 1.7976931348623157e308
DOUBLE_MIN_POSITIVE = 5e-324  # Double.MIN_VALUE

KEYWORDS = frozenset({"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS"})
WHITESPACE = " \t\n\r\f"
OPERATORS = ("<>", "<=", ">=", "=", "<", ">", "(", ",", ")", "+", "-")  # two-character ones first

LINE_COMMENT = re.compile(r"--[^\n\r]*(?:\r\n|\n|\r)")
BLOCK_COMMENT = re.compile(r"/\*[^*]*\*(?:\*|[^*/][^*]*\*)*/")
IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
DECIMAL = re.compile(r"(?:0|[1-9][0-9]*[lL]?)")
FLOATS = (
    re.compile(r"[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?"),
    re.compile(r"\.[0-9]+(?:[eE][+-]?[0-9]+)?"),
    re.compile(r"[0-9]+[eE][+-]?[0-9]+"),
)
STRING = re.compile(r"'(?:''|[^'])*'")


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # a keyword, an operator, "DECIMAL", "FLOAT", "STRING", "ID" or "EOF"
    text: str
    position: int  # of its first character in the expression


class _Lexer:
    """Tokens on demand: like JavaCC's, a character beyond the parser's last look-ahead is never read."""

    def __init__(self, expression: str) -> None:
        self.expression = expression
        self.position = 0
        self.tokens: list[Token] = []
        self.index = 0  # of the next token to consume

    def peek(self, ahead: int = 0) -> Token:
        while len(self.tokens) <= self.index + ahead:
            self.tokens.append(self._lex())
        return self.tokens[self.index + ahead]

    def take(self) -> Token:
        token = self.peek()
        self.index += 1
        return token

    def _skip(self) -> None:
        text = self.expression
        while self.position < len(text):
            char = text[self.position]
            if char in WHITESPACE:
                self.position += 1
                continue
            comment = None
            if text.startswith("--", self.position):
                comment = LINE_COMMENT.match(text, self.position)
            elif text.startswith("/*", self.position):
                comment = BLOCK_COMMENT.match(text, self.position)
            if comment is None:
                return
            self.position = comment.end()

    def _lex(self) -> Token:
        self._skip()
        text, start = self.expression, self.position
        if start >= len(text):
            return Token("EOF", "", start)
        char = text[start]
        kind, end = "", start
        if char.isascii() and (char.isalpha() or char in "_$"):
            match = IDENTIFIER.match(text, start)
            assert match is not None
            end = match.end()
            kind = "ID" if match.group().upper() not in KEYWORDS else match.group().upper()
        elif char.isascii() and (char.isdigit() or char == "."):
            decimal = DECIMAL.match(text, start)
            if decimal is not None:
                kind, end = "DECIMAL", decimal.end()
            for pattern in FLOATS:
                number = pattern.match(text, start)
                if number is not None and number.end() > end:
                    kind, end = "FLOAT", number.end()
        elif char == "'":
            string = STRING.match(text, start)
            if string is not None:
                kind, end = "STRING", string.end()
        else:
            for operator in OPERATORS:
                if text.startswith(operator, start):
                    kind, end = operator, start + len(operator)
                    break
        if not kind:
            raise FilterSyntaxError(text, f"lexical error: unexpected character {char!r}", start)
        self.position = end
        return Token(kind, text[start:end], start)


# --- the compiled tree ------------------------------------------------------------------------
# Each node evaluates to a Value; `_Failure` (an exception) stands for a Java exception thrown while
# evaluating. Flags mirror the Java classes the parser checks: ConstantExpression, BooleanExpression,
# PropertyExpression.


class _Failure(Exception):
    """RocketMQ's evaluator throws here."""


@dataclass(slots=True)
class _Node(abc.ABC):
    depth: int = field(default=1, init=False)
    is_constant = False  # org.apache.rocketmq.filter.expression.ConstantExpression
    is_boolean = False  # BooleanExpression
    is_property = False  # PropertyExpression

    @abc.abstractmethod
    def evaluate(self, properties: Mapping[str, str]) -> Value:
        """The node's value for one message's properties (RocketMQ's Expression.evaluate)."""


@dataclass(slots=True)
class _Constant(_Node):
    value: Value = None
    is_constant = True

    def evaluate(self, properties: Mapping[str, str]) -> Value:
        return self.value


@dataclass(slots=True)
class _BooleanConstant(_Constant):
    """TRUE, FALSE and NULL: BooleanConstantExpression, a ConstantExpression and a BooleanExpression."""

    is_boolean = True


@dataclass(slots=True)
class _Property(_Node):
    name: str = ""
    is_property = True

    def evaluate(self, properties: Mapping[str, str]) -> Value:
        return properties.get(self.name)


@dataclass(slots=True)
class _Negate(_Node):
    """`-x`: a number negated, anything else null. Never a ConstantExpression, even over one."""

    operand: _Node = field(default_factory=_Node)

    def evaluate(self, properties: Mapping[str, str]) -> Value:
        value = self.operand.evaluate(properties)
        if type(value) is int:
            return -value
        if type(value) is Long:
            return Long(-value)
        if type(value) is float:
            return -value
        return None


@dataclass(slots=True)
class _BooleanCast(_Node):
    """A bare property where a condition is expected: null if absent, else FALSE (a String is no Boolean)."""

    operand: _Node = field(default_factory=_Node)
    is_boolean = True

    def evaluate(self, properties: Mapping[str, str]) -> Value:
        value = self.operand.evaluate(properties)
        if value is None:
            return None
        return value if type(value) is bool else False


@dataclass(slots=True)
class _Not(_Node):
    operand: _Node = field(default_factory=_Node)
    is_boolean = True

    def evaluate(self, properties: Mapping[str, str]) -> Value:
        value = self.operand.evaluate(properties)
        return None if value is None else not value


@dataclass(slots=True)
class _And(_Node):
    """A chain a AND b AND c, evaluated left to right as Java's left-deep binary ANDs are."""

    operands: list[_Node] = field(default_factory=list)
    is_boolean = True

    def evaluate(self, properties: Mapping[str, str]) -> Value:
        unknown = False
        for operand in self.operands:
            value = operand.evaluate(properties)
            if value is False:
                return False
            unknown = unknown or value is None
        return None if unknown else True


@dataclass(slots=True)
class _Or(_Node):
    operands: list[_Node] = field(default_factory=list)
    is_boolean = True

    def evaluate(self, properties: Mapping[str, str]) -> Value:
        unknown = False
        for operand in self.operands:
            value = operand.evaluate(properties)
            if value is True:
                return True
            unknown = unknown or value is None
        return None if unknown else False


@dataclass(slots=True)
class _Equal(_Node):
    """`=` (and IS NULL): null only when the left side alone is null; both null is TRUE."""

    left: _Node = field(default_factory=_Node)
    right: _Node = field(default_factory=_Node)
    is_boolean = True

    def evaluate(self, properties: Mapping[str, str]) -> Value:
        left = self.left.evaluate(properties)
        right = self.right.evaluate(properties)
        if left is None or right is None:
            if left is None and right is None:
                return True
            return None if left is None else False
        return _compare(left, right) == 0


@dataclass(slots=True)
class _Order(_Node):
    """`<`, `<=`, `>`, `>=`: two Strings compare as Doubles (or throw); null if either side is."""

    operator: str = ""
    left: _Node = field(default_factory=_Node)
    right: _Node = field(default_factory=_Node)
    is_boolean = True

    def evaluate(self, properties: Mapping[str, str]) -> Value:
        left = self.left.evaluate(properties)
        if left is None:
            return None
        right = self.right.evaluate(properties)
        if right is None:
            return None
        if type(left) is str and type(right) is str:
            left_number, right_number = java_parse_double(left), java_parse_double(right)
            if left_number is None or right_number is None:
                raise _Failure(f"It's illegal to compare string by {self.operator!r}")
            answer = compare_numbers(left_number, right_number)
        else:
            answer = _compare(left, right)
        if self.operator == "<":
            return answer < 0
        if self.operator == "<=":
            return answer <= 0
        if self.operator == ">":
            return answer > 0
        return answer >= 0


@dataclass(slots=True)
class _In(_Node):
    operand: _Node = field(default_factory=_Node)
    values: frozenset[str] = frozenset()
    negated: bool = False
    is_boolean = True

    def evaluate(self, properties: Mapping[str, str]) -> Value:
        value = self.operand.evaluate(properties)
        if type(value) is not str:
            return None
        return (value in self.values) != self.negated


def _compare(left: Value, right: Value) -> int:
    answer = compare_values(left, right)
    if answer is None:
        raise _Failure(f"cannot convert {left!r} or {right!r} to compare them")
    return answer


@dataclass(frozen=True)
class Sql92Filter:
    """A compiled SQL92 expression; immutable and safe to share between pulls."""

    expression: str
    root: _Node = field(repr=False)

    def evaluate(self, properties: Mapping[str, str]) -> bool | None:
        """TRUE, FALSE or None (unknown) as RocketMQ computes it; FilterEvaluationError where it throws."""
        try:
            value = self.root.evaluate(properties)
        except _Failure as failure:
            raise FilterEvaluationError(f"{failure} (expression: {self.expression[:200]!r})") from None
        assert value is None or type(value) is bool, value
        return value

    def matches(self, properties: Mapping[str, str]) -> bool:
        """Whether the broker delivers a message with these properties: TRUE only, never on error."""
        try:
            return self.root.evaluate(properties) is True
        except _Failure:
            return False


def compile_sql92(expression: str) -> Sql92Filter:
    """Parse `expression` as RocketMQ's SqlFilter does; raise FilterSyntaxError where it refuses it."""
    if len(expression) > SQL92_EXPRESSION_MAX_CHARS:
        raise FilterTooComplexError(expression, f"longer than {SQL92_EXPRESSION_MAX_CHARS} characters")
    parser = _Parser(expression)
    root = parser.as_boolean(parser.or_expression(), parser.lexer.peek())
    return Sql92Filter(expression, root)


class _Parser:
    """Recursive descent over SelectorParser.jj's rules, with its construction-time checks."""

    def __init__(self, expression: str) -> None:
        self.expression = expression
        self.lexer = _Lexer(expression)
        self.nesting = 0

    def fail(self, reason: str, token: Token) -> FilterSyntaxError:
        return FilterSyntaxError(self.expression, reason, token.position)

    def expect(self, kind: str) -> Token:
        token = self.lexer.take()
        if token.kind != kind:
            shown = "end of expression" if token.kind == "EOF" else repr(token.text)
            raise self.fail(f"expected {kind} but found {shown}", token)
        return token

    def node(self, node: _Node, token: Token, *children: _Node) -> _Node:
        node.depth = 1 + max((child.depth for child in children), default=0)
        if node.depth > SQL92_TREE_DEPTH_MAX_COUNT:
            raise FilterTooComplexError(
                self.expression, f"nested deeper than {SQL92_TREE_DEPTH_MAX_COUNT}", token.position
            )
        return node

    def as_boolean(self, value: _Node, token: Token) -> _Node:
        if value.is_boolean:
            return value
        if value.is_property:
            return self.node(_BooleanCast(value), token, value)
        raise self.fail("expression will not result in a boolean value", token)

    def or_expression(self) -> _Node:
        left = self.and_expression()
        while self.lexer.peek().kind == "OR":
            token = self.lexer.take()
            right = self.as_boolean(self.and_expression(), token)
            left = self.chain(_Or, self.as_boolean(left, token), right, token)
        return left

    def and_expression(self) -> _Node:
        left = self.equality_expression()
        while self.lexer.peek().kind == "AND":
            token = self.lexer.take()
            right = self.as_boolean(self.equality_expression(), token)
            left = self.chain(_And, self.as_boolean(left, token), right, token)
        return left

    def chain(self, kind: type[_And] | type[_Or], left: _Node, right: _Node, token: Token) -> _Node:
        if type(left) is kind:
            left.operands.append(right)
            left.depth = max(left.depth, right.depth + 1)
            return self.node(left, token, *left.operands)
        return self.node(kind(operands=[left, right]), token, left, right)

    def equality_expression(self) -> _Node:
        left = self.comparison_expression()
        while True:
            token = self.lexer.peek()
            if token.kind in ("=", "<>"):
                self.lexer.take()
                right = self.comparison_expression()
                for operand in (left, right):
                    if operand.is_constant and operand.evaluate({}) is None:
                        raise self.fail("NULL cannot be compared", token)
                if left.is_constant and right.is_constant and left.is_boolean and not right.is_boolean:
                    raise self.fail("a boolean constant cannot be compared with a non-boolean one", token)
                left = self.node(_Equal(left=left, right=right), token, left, right)
                if token.kind == "<>":
                    left = self.node(_Not(operand=left), token, left)
            elif token.kind == "IS":
                self.lexer.take()
                negated = self.lexer.peek().kind == "NOT"
                if negated:
                    self.lexer.take()
                self.expect("NULL")
                null = _BooleanConstant(value=None)
                left = self.node(_Equal(left=left, right=null), token, left)
                if negated:
                    left = self.node(_Not(operand=left), token, left)
            else:
                return left

    def comparison_expression(self) -> _Node:
        left = self.unary_expression()
        while True:
            token = self.lexer.peek()
            if token.kind in ("<", "<=", ">", ">="):
                self.lexer.take()
                left = self.order(token.kind, left, self.unary_expression(), token)
            elif token.kind == "BETWEEN" or (token.kind == "NOT" and self.lexer.peek(1).kind == "BETWEEN"):
                left = self.between(left, token)
            elif token.kind == "IN" or (token.kind == "NOT" and self.lexer.peek(1).kind == "IN"):
                left = self.in_list(left, token)
            elif token.kind == "NOT":
                raise self.fail("expected BETWEEN or IN after NOT", self.lexer.peek(1))
            else:
                return left

    def order(self, operator: str, left: _Node, right: _Node, token: Token) -> _Node:
        for operand in (left, right):
            if operand.is_boolean or (operand.is_constant and not _is_number(operand.evaluate({}))):
                raise self.fail(f"only numbers can be compared with {operator!r}", token)
        return self.node(_Order(operator=operator, left=left, right=right), token, left, right)

    def between(self, value: _Node, token: Token) -> _Node:
        negated = self.lexer.take().kind == "NOT"
        if negated:
            self.lexer.take()
        low = self.unary_expression()
        self.expect("AND")
        high = self.unary_expression()
        if negated:
            lower, higher = self.order("<", value, low, token), self.order(">", value, high, token)
            return self.node(_Or(operands=[lower, higher]), token, lower, higher)
        if low.is_constant and high.is_constant:
            low_value, high_value = low.evaluate({}), high.evaluate({})
            if low_value is None or high_value is None:
                raise self.fail("the values of BETWEEN cannot be NULL", token)
            if not (_is_number(low_value) and _is_number(high_value)):
                raise self.fail("only numbers can be compared with BETWEEN", token)
            if (compare_values(high_value, low_value) or 0) < 0:
                raise self.fail(f"BETWEEN {low_value} AND {high_value}: the first must not exceed the second", token)
        at_least, at_most = self.order(">=", value, low, token), self.order("<=", value, high, token)
        return self.node(_And(operands=[at_least, at_most]), token, at_least, at_most)

    def in_list(self, value: _Node, token: Token) -> _Node:
        negated = self.lexer.take().kind == "NOT"
        if negated:
            self.lexer.take()
        self.expect("(")
        values = {_decode_string(self.expect("STRING").text)}
        while self.lexer.peek().kind == ",":
            self.lexer.take()
            values.add(_decode_string(self.expect("STRING").text))
        self.expect(")")
        if not value.is_property:
            raise self.fail("IN needs a property on its left", token)
        return self.node(_In(operand=value, values=frozenset(values), negated=negated), token, value)

    def unary_expression(self) -> _Node:
        token = self.lexer.peek()
        if token.kind not in ("+", "-", "NOT", "("):
            return self.primary_expression()
        self.nesting += 1
        if self.nesting > SQL92_NESTING_MAX_COUNT:
            raise FilterTooComplexError(
                self.expression, f"nested deeper than {SQL92_NESTING_MAX_COUNT}", token.position
            )
        self.lexer.take()
        if token.kind == "(":
            result = self.or_expression()
            self.expect(")")
        else:
            operand = self.unary_expression()
            if token.kind == "+":
                result = operand
            elif token.kind == "-":
                result = self.node(_Negate(operand=operand), token, operand)
            else:
                operand = self.as_boolean(operand, token)
                result = self.node(_Not(operand=operand), token, operand)
        self.nesting -= 1
        return result

    def primary_expression(self) -> _Node:
        token = self.lexer.take()
        kind = token.kind
        if kind == "ID":
            return _Property(name=token.text)
        if kind == "STRING":
            return _Constant(value=_decode_string(token.text))
        if kind in ("TRUE", "FALSE", "NULL"):
            return _BooleanConstant(value={"TRUE": True, "FALSE": False, "NULL": None}[kind])
        if kind == "DECIMAL":
            return _Constant(value=self.decimal(token))
        if kind == "FLOAT":
            number = float(token.text)
            if number > DOUBLE_MAX or number < DOUBLE_MIN_POSITIVE:
                raise self.fail(f"{token.text} is out of a Double's range (or zero)", token)
            return _Constant(value=number)
        shown = "end of expression" if kind == "EOF" else repr(token.text)
        raise self.fail(f"expected a literal, a property or '(' but found {shown}", token)

    def decimal(self, token: Token) -> int:
        number = int(token.text.rstrip("lL"))
        if number > LONG_MAX:
            raise self.fail(f"{token.text} does not fit a Long", token)
        return number if number <= INTEGER_MAX else Long(number)


def _decode_string(text: str) -> str:
    return text[1:-1].replace("''", "'")


def _is_number(value: Value) -> bool:
    return type(value) in (int, Long, float)
