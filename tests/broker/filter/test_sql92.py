"""RocketMQ 4.9.7's SQL92 property filter: grammar, Java's conversions, null logic, errors and limits,
and a differential run against RocketMQ's own FilterFactory/SqlFilter (javac'd at test time)."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import random
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from shoal.broker.filter import (
    FilterEvaluationError,
    FilterSyntaxError,
    FilterTooComplexError,
    Sql92Filter,
    UnsupportedExpressionTypeError,
    check_subscription,
    compile_filter,
    compile_sql92,
)
from shoal.broker.filter.limits import (
    SQL92_EXPRESSION_MAX_CHARS,
    SQL92_NESTING_MAX_COUNT,
    SQL92_TREE_DEPTH_MAX_COUNT,
)
from shoal.protocol import ResponseCode

REPO_ROOT = Path(__file__).resolve().parents[3]
ORACLE_SOURCE = Path(__file__).resolve().parent / "java" / "Sql92Oracle.java"
JAVA_TIMEOUT_S = 300.0


def outcome(compiled: Sql92Filter, properties: dict[str, str]) -> str:
    """T, F, N (null) or X (RocketMQ's evaluator throws), as the Java oracle prints them."""
    try:
        value = compiled.evaluate(properties)
    except FilterEvaluationError:
        return "X"
    return "N" if value is None else "T" if value else "F"


def shoal_answer(expression: str, maps: list[dict[str, str]]) -> str:
    try:
        compiled = compile_sql92(expression)
    except FilterSyntaxError:
        return "E"
    return "".join(outcome(compiled, properties) for properties in maps)


# --- table-driven: (expression, properties, outcome) -------------------------------------------

GRAMMAR_CASES = [
    # comparisons on strings: = and <> only compare; ordering needs numbers
    ("a = 'x'", {"a": "x"}, "T"),
    ("a = 'x'", {"a": "y"}, "F"),
    ("a <> 'x'", {"a": "y"}, "T"),
    ("'x' = a", {"a": "x"}, "T"),
    ("a = b", {"a": "1", "b": "1.0"}, "F"),  # two Strings compare as Strings for =
    ("a < b", {"a": "1", "b": "1.5"}, "T"),  # ... but as Doubles for ordering
    ("a < b", {"a": "x", "b": "1"}, "X"),
    # numbers: the property is parsed as the constant's class
    ("a = 5", {"a": "5"}, "T"),
    ("a = 5", {"a": "+5"}, "T"),
    ("a = 5", {"a": "5.0"}, "X"),  # Integer.valueOf("5.0") throws
    ("a = 5", {"a": "abc"}, "X"),
    ("a = 5", {"a": " 5"}, "X"),
    ("a = 5.0", {"a": "5"}, "T"),  # Double.valueOf
    ("a = 5.0", {"a": " 5 "}, "T"),  # Double.valueOf trims
    ("a = 5.0", {"a": "5d"}, "T"),
    ("a = 8.0", {"a": "0x1p3"}, "T"),
    ("a > 1", {"a": "2"}, "T"),
    ("a >= 2", {"a": "2"}, "T"),
    ("a < 2", {"a": "2"}, "F"),
    ("a <= 2", {"a": "2"}, "T"),
    ("a > 2147483647", {"a": "2147483648"}, "X"),  # Integer.valueOf overflows: throws
    ("a > 2147483648", {"a": "2147483649"}, "T"),  # a Long constant: Long.valueOf
    ("a > 1", {"a": "2147483648"}, "X"),
    ("a > 1.5", {"a": "NaN"}, "T"),  # Double.compare puts NaN above everything
    ("a = 0.5", {"a": ".5"}, "T"),
    ("a = 5L", {"a": "5"}, "T"),
    ("a = -5", {"a": "-5"}, "T"),
    ("a = - -5", {"a": "5"}, "T"),
    ("a = +5", {"a": "5"}, "T"),
    ("-a = 5", {"a": "-5"}, "N"),  # negating a String is null
    ("a > 1E3", {"a": "1001"}, "T"),
    ("a = 1e0", {"a": "1"}, "T"),
    # booleans: the property becomes Boolean.valueOf
    ("a = TRUE", {"a": "true"}, "T"),
    ("a = true", {"a": "TRUE"}, "T"),
    ("a = TRUE", {"a": "yes"}, "F"),
    ("a = FALSE", {"a": "no"}, "T"),
    ("TRUE = a", {"a": "true"}, "X"),  # RocketMQ converts the wrong side: ClassCastException
    ("5 = TRUE", {}, "F"),
    ("TRUE = TRUE", {}, "T"),
    ("TRUE", {}, "T"),
    ("FALSE", {}, "F"),
    ("NULL", {}, "N"),
    # BETWEEN, IN
    ("a BETWEEN 1 AND 3", {"a": "2"}, "T"),
    ("a BETWEEN 1 AND 3", {"a": "3"}, "T"),
    ("a BETWEEN 1 AND 3", {"a": "4"}, "F"),
    ("a NOT BETWEEN 1 AND 3", {"a": "4"}, "T"),
    ("a NOT BETWEEN 3 AND 1", {"a": "2"}, "T"),  # no bounds check for NOT BETWEEN
    ("a BETWEEN -3 AND -5", {"a": "-4"}, "F"),  # negated bounds are no constants: not checked
    ("a BETWEEN 1.5 AND 2", {"a": "2"}, "T"),
    ("a IN ('x', 'y')", {"a": "y"}, "T"),
    ("a IN ('x', 'y')", {"a": "z"}, "F"),
    ("a NOT IN ('x', 'y')", {"a": "z"}, "T"),
    ("a IN ('x')", {}, "N"),
    ("a NOT IN ('x')", {}, "N"),
    ("(a) IN ('x')", {"a": "x"}, "T"),
    ("a IN ('it''s')", {"a": "it's"}, "T"),
    ("TAGS IN ('TagA', 'TagB')", {"TAGS": "TagA"}, "T"),
    ("TAGS = 'TagA' AND KEYS = 'k1'", {"TAGS": "TagA", "KEYS": "k1"}, "T"),
    # IS NULL, null logic
    ("a IS NULL", {}, "T"),
    ("a IS NULL", {"a": ""}, "F"),
    ("a IS NOT NULL", {"a": "x"}, "T"),
    ("a = 'x'", {}, "N"),
    ("'x' = a", {}, "F"),  # only a null on the left makes = null
    ("'x' <> a", {}, "T"),
    ("a <> 'x'", {}, "N"),
    ("a = b", {}, "T"),  # null equals null
    ("a > 1", {}, "N"),
    ("NOT (a = 'x')", {}, "N"),
    ("a", {}, "N"),
    ("a", {"a": "true"}, "F"),  # a String is never a Boolean
    ("NOT a", {"a": "x"}, "T"),
    ("a = 'x' OR TRUE", {}, "T"),
    ("a = 'x' AND FALSE", {}, "F"),
    ("a = 'x' AND TRUE", {}, "N"),
    ("a = 'x' OR FALSE", {}, "N"),
    # a throwing comparison sinks the whole expression unless short-circuited before it
    ("a = 5 OR TRUE", {"a": "x"}, "X"),
    ("TRUE OR a = 5", {"a": "x"}, "T"),
    ("NOT (a = 5)", {"a": "x"}, "X"),
    # precedence: AND over OR; NOT over comparisons
    ("TRUE OR FALSE AND FALSE", {}, "T"),
    ("(TRUE OR FALSE) AND FALSE", {}, "F"),
    ("NOT a = 'x'", {"a": "x"}, "X"),  # (NOT a) = 'x'
    ("NOT a = FALSE", {"a": "x"}, "F"),  # (NOT a) is TRUE
    ("NOT NOT TRUE", {}, "T"),
    ("a = 1 = TRUE", {"a": "1"}, "T"),  # comparisons chain left to right
    # keywords in any case, comments, whitespace, trailing text ignored
    ("a is not null and B in ('x') Or fAlSe", {"a": "1", "B": "x"}, "T"),
    ("a = 1 /* c */ AND b = 2", {"a": "1", "b": "2"}, "T"),
    ("a = 1 -- c\n AND b = 3", {"a": "1", "b": "2"}, "F"),
    ("a = 1 --c", {"a": "1"}, "T"),  # no line break: two minus signs, after the end: ignored
    ("a = 1 b = 2", {"a": "1"}, "T"),
    ("a = 1) ; drop table", {"a": "1"}, "T"),
    ("\t$x_1\r\n=\f'y'", {"$x_1": "y"}, "T"),
    ("A = 'x'", {"a": "x"}, "N"),  # property names are case-sensitive
    # no hex, octal or suffixed floats, no LIKE/CONTAINS (5.x): RocketMQ reads a prefix and ignores the rest
    ("a = 0x10", {"a": "0"}, "T"),  # a = 0
    ("a = 007", {"a": "0"}, "T"),
    ("a = 0L", {"a": "0"}, "T"),
    ("a = 1.5L", {"a": "1.5"}, "T"),
    ("a = 5E", {"a": "5"}, "T"),
    ("a LIKE 'x%'", {"a": "xy"}, "F"),  # just `a`
    ("a CONTAINS 'x'", {}, "N"),
    ("a STARTSWITH 'x' OR TRUE", {"a": "x"}, "F"),
]


@pytest.mark.parametrize(("expression", "properties", "expected"), GRAMMAR_CASES)
def test_expression_evaluates_as_rocketmq_does(expression: str, properties: dict[str, str], expected: str) -> None:
    """Each grammar construct, conversion and null case: compile, evaluate, compare with RocketMQ's result."""
    compiled = compile_sql92(expression)
    assert outcome(compiled, properties) == expected
    assert compiled.matches(properties) is (expected == "T")


SYNTAX_ERRORS = [
    "",
    "   ",
    "a =",
    "a = 'x",  # unterminated string
    "(a = 1",
    "a = 1 AND",
    "a ! 1",
    "a = 1 NOT",
    "a IS 1",
    "a IS NOT 1",
    "a IN ()",
    "a IN (1)",  # IN takes strings only
    "a IN 'x'",
    "'x' IN ('x')",  # IN needs a property
    "(a = 'x') IN ('x')",
    "a = NULL",  # NULL cannot be compared
    "NULL = a",
    "TRUE = 1",
    "TRUE = 'x'",
    "a > 'x'",  # ordering needs numbers
    "'x' < a",
    "a > TRUE",
    "a > NULL",
    "(a = 1) > 2",
    "NOT a > 1",
    "NOT a BETWEEN 1 AND 2",
    "a BETWEEN 3 AND 1",
    "a BETWEEN NULL AND 1",
    "a BETWEEN 'a' AND 'b'",
    "a BETWEEN 1 AND TRUE",
    "a BETWEEN 1",
    "1",
    "'x'",
    "-a",
    "NOT 1",
    "a OR 1",
    "1 AND a",
    "a = 0.0",  # Double below Double.MIN_VALUE
    "a = 1E-400",
    "a = 1E400",
    "a = 9223372036854775808",
    "a = -9223372036854775808",
    "é = 'x'",  # identifiers are ASCII
    "a.b = 'x'",
    "a = 'x' /* open comment",
    "a / 2 = 1",
]


@pytest.mark.parametrize("expression", SYNTAX_ERRORS)
def test_bad_expression_raises_a_syntax_error(expression: str) -> None:
    """Each expression RocketMQ refuses raises FilterSyntaxError whose message names the expression."""
    with pytest.raises(FilterSyntaxError, match="Invalid MessageSelector"):
        compile_sql92(expression)


def test_syntax_error_reports_the_position() -> None:
    """A parse error points at the offending token."""
    with pytest.raises(FilterSyntaxError) as raised:
        compile_sql92("a = 1 AND b >")
    assert raised.value.position == len("a = 1 AND b >")
    assert "end of expression" in str(raised.value)


def test_evaluate_raises_where_rocketmq_throws_and_matches_is_false() -> None:
    """A property that is no number of the constant's class: evaluate raises, matches says no."""
    compiled = compile_sql92("a > 5")
    with pytest.raises(FilterEvaluationError, match="a > 5"):
        compiled.evaluate({"a": "many"})
    assert compiled.matches({"a": "many"}) is False


def test_flat_chains_of_or_are_not_limited_by_depth() -> None:
    """A long OR chain is one node, evaluated left to right, not a deep tree."""
    expression = " OR ".join(f"a = '{index}'" for index in range(SQL92_TREE_DEPTH_MAX_COUNT * 4))
    compiled = compile_sql92(expression)
    assert compiled.matches({"a": str(SQL92_TREE_DEPTH_MAX_COUNT * 4 - 1)})
    assert not compiled.matches({"a": "x"})


@pytest.mark.parametrize(
    "expression",
    [
        "(" * (SQL92_NESTING_MAX_COUNT + 1) + "TRUE" + ")" * (SQL92_NESTING_MAX_COUNT + 1),
        "NOT " * (SQL92_NESTING_MAX_COUNT + 1) + "TRUE",
        "a = " + "- " * (SQL92_NESTING_MAX_COUNT + 1) + "1",
        "a = 1" + " = TRUE" * SQL92_TREE_DEPTH_MAX_COUNT,
        "a = '" + "x" * SQL92_EXPRESSION_MAX_CHARS + "'",
        "(" * 100_000,
    ],
    ids=["parentheses", "not", "negation", "comparison-chain", "length", "hostile"],
)
def test_expression_beyond_a_limit_is_refused(expression: str) -> None:
    """Too long or too deep: FilterTooComplexError (a FilterSyntaxError), never a RecursionError."""
    with pytest.raises(FilterTooComplexError):
        compile_sql92(expression)


def test_expression_at_the_limits_compiles() -> None:
    """Nesting right at the limit is accepted."""
    depth = SQL92_NESTING_MAX_COUNT
    assert compile_sql92("(" * depth + "TRUE" + ")" * depth).matches({})


def test_check_subscription_answers_as_check_client_config() -> None:
    """Tags pass; SQL92 needs enablePropertyFilter (SYSTEM_ERROR) and must compile (SUBSCRIPTION_PARSE_FAILED)."""
    assert check_subscription("TAG", "a || b", property_filter_enabled=False).ok
    assert check_subscription(None, "*", property_filter_enabled=False).filter is None
    refused = check_subscription("SQL92", "a > 1", property_filter_enabled=False)
    assert refused.code == ResponseCode.SYSTEM_ERROR
    assert refused.remark == "The broker does not support consumer to filter message by SQL92"
    bad = check_subscription("SQL92", "a >", property_filter_enabled=True)
    assert bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and ResponseCode.SUBSCRIPTION_PARSE_FAILED.value == 23
    assert bad.remark is not None and "Invalid MessageSelector" in bad.remark
    assert check_subscription("SQL92", "", property_filter_enabled=True).code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert (
        check_subscription("XPATH", "/a", property_filter_enabled=True).code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    )
    good = check_subscription("SQL92", "a > 1", property_filter_enabled=True)
    assert good.ok and good.filter is not None and good.filter.matches({"a": "2"})


def test_compile_filter_dispatches_on_expression_type() -> None:
    """TAG (or none) has no compiled filter; SQL92 compiles; another type is refused."""
    assert compile_filter("", "*") is None
    assert compile_filter("SQL92", "TRUE") is not None
    with pytest.raises(UnsupportedExpressionTypeError):
        compile_filter("CLASS", "x")


# --- differential: the same corpus through RocketMQ's own SqlFilter ------------------------------

PROPERTY_MAPS: list[dict[str, str]] = [
    {},
    {"a": "1", "b": "2", "c": "x", "TAGS": "TagA"},
    {"a": "10", "b": "-3", "c": "1.5", "TAGS": "TagB", "KEYS": "k1 k2"},
    {"a": "abc", "b": "true", "c": "TRUE", "TAGS": "TagC"},
    {"a": "2147483648", "b": "9223372036854775808", "c": "3000000000"},
    {"a": " 7 ", "b": "0x1p3", "c": "1e3", "TAGS": ""},
    {"a": "NaN", "b": "-0.0", "c": "0.0", "d": "Infinity"},
    {"a": "+5", "b": "5L", "c": "1.5f", "d": "1_0"},
    {"a": "\u0663", "b": "\uff15", "c": "x'y", "d": "It''s"},
    {"a": "-2147483648", "b": "-9223372036854775808", "c": "-Infinity", "d": "-NaN"},
    {"a": "5", "b": "5.0", "c": "5", "d": "", "TAGS": "TagA"},
    {"a": "1.", "b": ".5", "c": "5e", "d": "0X1.8P1d"},
]

HAND_WRITTEN = (
    [expression for expression, _, _ in GRAMMAR_CASES]
    + SYNTAX_ERRORS
    + [
        "a = b",
        "a <> b",
        "a < c",
        "b >= c",
        "a = c",
        "b = TRUE",
        "c = TRUE",
        "b = FALSE",
        "a = 1.0",
        "a = 7",
        "a = 7.0",
        "b = 8",
        "b = 8.0",
        "c = 1000",
        "c = 1000.0",
        "a > 2147483647",
        "b > 1",
        "b > 1.0",
        "c > 2999999999",
        "a = -2147483648",
        "b = -9223372036854775807",
        "b < -9223372036854775807",
        "a = 0.5",
        "b < 0.1",
        "b = -0.1",
        "a = 3",
        "b = 5",
        "d = 10",
        "c = 1.5",
        "d = 1.0",
        "d = 3.0",
        "d IS NULL",
        "d IS NOT NULL",
        "d = ''",
        "'' = d",
        "TAGS IN ('TagA', 'TagB', 'TagC', 'TagD', 'TagE', 'TagF')",
        "TAGS NOT IN ('TagA', 'TagB', 'TagC', 'TagD', 'TagE', 'TagF')",
        "TAGS = 'TagA' OR TAGS = 'TagB'",
        "TAGS <> 'TagA' AND a > 1",
        "a BETWEEN 0 AND 10",
        "a BETWEEN 0 AND 10.5",
        "a NOT BETWEEN 0 AND 10",
        "c BETWEEN 1 AND 2",
        "c BETWEEN 1.0 AND 2.0",
        "a BETWEEN -10 AND 10",
        "a BETWEEN b AND c",
        "-(a = 1) IS NULL",
        "-(a = 5) IS NULL",
        "a > -(b = 5)",
        "NOT (a IS NULL) AND NOT (b IS NULL)",
        "NOT a",
        "NOT a OR NOT b",
        "a OR b",
        "a AND TRUE",
        "(a = 1) = (b = 2)",
        "(a = 1) = TRUE",
        "(a = 1) <> FALSE",
        "5 = a",
        "5.0 = a",
        "TRUE = (a = 1)",
        "'1' = a",
        "'true' = TRUE",
        "'yes' = TRUE",
        "1 = 1",
        "1 = 1.0",
        "1 = 1L",
        "2147483648 = 2147483648.0",
        "9007199254740993 = 9007199254740992.0",
        "0.5 > 1",
        "1 < 2",
        "a = 1 AND b = 2 OR c = 'x'",
        "a = 1 OR b = 2 AND c = 'x'",
        "NOT a = 1 OR b = 2",
        "a = 1 AND (b = 2 OR c = 'x')",
        "((((a = 1))))",
        "a IN ('1', '10', 'abc')",
        "a in ('1') and b not in ('2') or c is null",
        "c = 'x''y'",
        "c = 'x'",
        "d = 'It''''s'",
        "a = 1 IS NULL",
        "a IS NULL = TRUE",
        "a IS NULL IS NULL",
        "a > 1 IS NOT NULL",
        "a = 1 -- comment\n OR TRUE",
        "a = 1 -- comment",
        "a = 1 /* x */ OR /* y */ b = 2",
        "a = 1 /**/ OR b = 2",
        "a = 1 /*** x ***/ OR b = 2",
        "a =/* */1",
        "a=1AND b=2",
        "a=1ANDb=2",
        "a = 1 AND b",
        "a = 1 ORDER",
        "a = 1 )",
        "a = 1 , 2",
        "a = 1 'x'",
        "a = 1 TRUE",
        "a = 1 # x",
        "a = 1 ! x",
        "a = 1 IS",
        "a = 1 IS NOT",
        "a = 1 NOT IN",
        "a = 1 NOT x",
        "a = 1 BETWEEN",
        "a = 1 + 1",
        "a = 1 - 1",
        "a = 1 -",
        "a = 1 ==",
        "a = 1 <>",
        "a = 1.e1",
        "a = 1.E+1",
        "a = .5e-1",
        "a = 10e0",
        "a = 00.5",
        "a = 0.5.5",
        "a = 1e1e1",
        "a = 123456789012",
        "a = 4.9E-324",
        "a = 1.7976931348623157E308",
        "a = 1.7976931348623159E308",
        "b < 2.5E-324",
        "a = 'multi\nline'",
        "NULL IS NULL",
        "NULL IS NOT NULL",
        "TRUE IS NULL",
        "NOT NULL",
        "NULL OR TRUE",
        "NULL AND FALSE",
        "- - - a = 1",
        "+ + a = 1",
        "+ 'x' = c",
        "-'x' IS NULL",
        "- TRUE IS NULL",
        "a = - 2147483648",
        "a > -2147483649",
        "b <> b",
        "A = a",
        "_ IS NULL",
        "$ IS NULL",
        "a1 IS NULL",
        "1a IS NULL",
        "notx IS NULL",
        "nullx IS NULL",
        "in IS NULL",
        "\u212a = 'x'",
        "a = '\u00e9'",
    ]
)

OPERANDS = [
    "a",
    "b",
    "c",
    "d",
    "TAGS",
    "1",
    "5",
    "10",
    "-3",
    "0.5",
    "1.5",
    "1e3",
    "2147483648",
    "'x'",
    "'1'",
    "TRUE",
    "NULL",
]
CONDITIONS = [
    "{x} = {y}",
    "{x} <> {y}",
    "{x} > {y}",
    "{x} >= {y}",
    "{x} < {y}",
    "{x} <= {y}",
    "{x} BETWEEN {y} AND {z}",
    "{x} NOT BETWEEN {y} AND {z}",
    "{x} IN ('1', 'x', 'TagA')",
    "{x} NOT IN ('5', 'abc')",
    "{x} IS NULL",
    "{x} IS NOT NULL",
    "{x}",
    "NOT {x} = {y}",
]


def generated_expressions(count: int, seed: int = 1949) -> list[str]:
    """Random conditions joined by AND/OR/NOT with parentheses, some ill-typed on purpose."""
    rng = random.Random(seed)

    def condition() -> str:
        template = rng.choice(CONDITIONS)
        return template.format(x=rng.choice(OPERANDS), y=rng.choice(OPERANDS), z=rng.choice(OPERANDS))

    def expression(depth: int) -> str:
        if depth == 0 or rng.random() < 0.35:
            return condition()
        choice = rng.random()
        if choice < 0.4:
            return f"{expression(depth - 1)} AND {expression(depth - 1)}"
        if choice < 0.8:
            return f"{expression(depth - 1)} OR {expression(depth - 1)}"
        if choice < 0.9:
            return f"NOT ({expression(depth - 1)})"
        return f"({expression(depth - 1)})"

    return [expression(3) for _ in range(count)]


def _load_get_rocketmq() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "shoal_tools_get_rocketmq_sql92", REPO_ROOT / "tools" / "get_rocketmq.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI=true: the differential test must run)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def oracle_classpath(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Sql92Oracle.java compiled against RocketMQ 4.9.7's jars (cached by source hash)."""
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            _unavailable(f"{tool} is not on PATH")
    get_rocketmq = _load_get_rocketmq()
    lib = get_rocketmq.cached_lib(get_rocketmq.rocketmq_dir())
    if lib is None:
        if shutil.which("mvn") is None:
            _unavailable("mvn is not on PATH and RocketMQ's jars are not cached (tools/get_rocketmq.py)")
        lib = get_rocketmq.ensure_jars()
    if not (Path(lib) / "rocketmq-filter-4.9.7.jar").is_file():
        _unavailable(f"rocketmq-filter-4.9.7.jar is not in {lib}")
    digest = hashlib.sha256(ORACLE_SOURCE.read_bytes()).hexdigest()[:16]
    pytest_cache = getattr(request.config, "cache", None)
    cache = Path(pytest_cache.mkdir("shoal-sql92-oracle")) if pytest_cache else tmp_path_factory.mktemp("oracle")
    classes = cache / digest
    if not (classes / "Sql92Oracle.class").is_file():
        classes.mkdir(parents=True, exist_ok=True)
        command = ["javac", "-nowarn", "-encoding", "UTF-8", "-d", str(classes), "-cp", f"{lib}/*", str(ORACLE_SOURCE)]
        result = subprocess.run(command, capture_output=True, text=True, timeout=JAVA_TIMEOUT_S, check=False)
        assert result.returncode == 0, f"javac failed:\n{result.stdout}\n{result.stderr}"
    return f"{classes}{os.pathsep}{lib}/*"


def java_answers(classpath: str, expressions: list[str], maps: list[dict[str, str]]) -> list[str]:
    def hex_of(text: str) -> str:
        return text.encode("utf-8", "surrogatepass").hex()

    lines = [str(len(maps))]
    lines += [" ".join(f"{hex_of(key)}:{hex_of(value)}" for key, value in sorted(m.items())) or "-" for m in maps]
    lines += [hex_of(expression) for expression in expressions]
    command = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", classpath, "Sql92Oracle"]
    result = subprocess.run(
        command, input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=JAVA_TIMEOUT_S, check=False
    )
    assert result.returncode == 0, result.stderr
    answers = result.stdout.splitlines()
    assert len(answers) == len(expressions), result.stderr
    return answers


def test_shoal_agrees_with_rocketmq_sqlfilter_on_the_corpus(oracle_classpath: str) -> None:
    """Hand-written and generated expressions over varied property maps: RocketMQ 4.9.7 and Shoal give the
    same verdict (does not compile, or T/F/null/throws per map) for every one."""
    corpus = list(dict.fromkeys(HAND_WRITTEN + generated_expressions(600)))
    assert len(corpus) > 700
    expected = java_answers(oracle_classpath, corpus, PROPERTY_MAPS)
    disagreements = [
        (expression, java, shoal)
        for expression, java in zip(corpus, expected, strict=True)
        if (shoal := shoal_answer(expression, PROPERTY_MAPS)) != java
    ]
    assert not disagreements, "\n".join(f"{e!r}: RocketMQ {j} Shoal {s}" for e, j, s in disagreements[:40])
    # the corpus exercises every outcome, not only errors
    letters = "".join(expected)
    assert all(letter in letters for letter in "ETFNX")


def test_the_table_of_cases_is_what_rocketmq_answers(oracle_classpath: str) -> None:
    """Every row of GRAMMAR_CASES (expression, its own properties, outcome) checked against RocketMQ itself."""
    maps = [properties for _, properties, _ in GRAMMAR_CASES]
    answers = java_answers(oracle_classpath, [expression for expression, _, _ in GRAMMAR_CASES], maps)
    wrong = [
        (expression, answer[index])
        for index, ((expression, _, expected), answer) in enumerate(zip(GRAMMAR_CASES, answers, strict=True))
        if (answer[index] if answer != "E" else "E") != expected
    ]
    assert not wrong
