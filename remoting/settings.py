"""Settings under RocketMQ's names, checked at load: what broker.conf and namesrv.conf share.

Every key a server reads is declared once, as a dataclass field whose metadata names its Java key
(`"java"`) and what it takes (`"allowed"`, an `Allowed`: the words an error shows and a test of the
parsed value). `build_settings` parses and checks each key; any failure is a `ConfigError`, one line
naming the key, the value as written and what the key takes. The value kinds both servers use
(ports, hosts, intervals, connection counts, file paths) are declared here; the broker's own in
`shoal.broker.config`, the NameServer's in `shoal.namesrv.config`.
"""

from __future__ import annotations

import enum
import ipaddress
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from shoal.formats.java_properties import parse_java_properties
from shoal.remoting import limits
from shoal.remoting.tls import TlsConfigError, TlsSettings, is_tls_key, load_tls_settings


class ConfigError(ValueError):
    """A broker.conf or namesrv.conf value Shoal cannot run with. The message is one line: the
    key, the value as written and what the key takes."""


def _show(raw: object) -> str:
    """A value as the user wrote it; quoted when blanks or oddities would hide in the message."""
    text = str(raw)
    return text if text and text == text.strip() and text.isprintable() else repr(text)


@dataclass(frozen=True)
class Allowed:
    """What one key takes: `test` on the parsed value, and the words an error shows. `parse`
    replaces the key's own parser for the check (e.g. a path checked as text before `Path("")`
    silently becomes the current directory)."""

    words: str
    test: Callable[[Any], bool]
    parse: Callable[[str], Any] | None = None

    def refuse(self, key: str, raw: object) -> ConfigError:
        return ConfigError(f"{key}={_show(raw)} is not allowed: {key} takes {self.words}")

    def check(self, key: str, raw: object, value: Any) -> None:
        if not self.test(value):
            raise self.refuse(key, raw)


def between(low: int, high: int, unit: str = "", note: str = "") -> Allowed:
    """A whole number in low..high (both included)."""
    words = f"a whole number {low}..{high}" + (f" {unit}" if unit else "") + (f" ({note})" if note else "")
    return Allowed(words, lambda value: type(value) is int and low <= value <= high)


def _is_host(text: str) -> bool:
    bare = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    try:
        ipaddress.ip_address(bare)
    except ValueError:
        return bool(_HOST_NAME.fullmatch(text))
    return True


def is_address(text: str) -> bool:
    """host:port as RemotingUtil.string2SocketAddress reads it (the port after the last ':')."""
    host, separator, port = text.rpartition(":")
    return bool(separator) and _is_host(host) and port.isdigit() and 1 <= int(port) <= limits.PORT_MAX


def java_split(text: str) -> list[str]:
    """`String.split(";")`: trailing empty parts are dropped, inner ones kept."""
    parts = text.split(";")
    while parts and not parts[-1].strip():
        parts.pop()
    return [part.strip() for part in parts]


def one_of(kind: type[enum.Enum]) -> Allowed:
    names = [member.value for member in kind]
    return Allowed(f"exactly one of {', '.join(names)}", lambda value: isinstance(value, kind))


_HOST_NAME = re.compile(
    r"(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?"
)

PORT_OR_ANY = between(0, limits.PORT_MAX, note="0: any free port")
INTERVAL_MS = between(1, limits.CONFIG_INTERVAL_MAX_MS, "ms")
INTERVAL_OR_ZERO_MS = between(0, limits.CONFIG_INTERVAL_MAX_MS, "ms")
BOOLEAN = Allowed("true or false", lambda value: isinstance(value, bool))
HOST = Allowed("an IP address or a host name", lambda value: isinstance(value, str) and _is_host(value))
HOST_OR_EMPTY = Allowed(
    "an IP address or a host name, or nothing for this host's address",
    lambda value: isinstance(value, str) and (value == "" or _is_host(value)),
)
ANY_TEXT = Allowed("any text", lambda value: isinstance(value, str))
TIMEOUT_S = between(1, limits.CONFIG_INTERVAL_MAX_MS // 1000, "s")
CONNECTIONS = between(1, limits.CONNECTIONS_MAX_COUNT)
FILE_PATH_OR_EMPTY = Allowed(
    "a file path (printable text), or nothing for the default place",
    lambda value: isinstance(value, str) and (value == "" or value.isprintable()),
)
FILE_OR_EMPTY = Allowed(
    "a file path without control characters, or nothing", lambda value: isinstance(value, str) and value.isprintable()
)


def max_idle_field() -> Any:
    """serverChannelMaxIdleTimeSeconds, as both servers take it: a client connection with no read
    or write this long is closed (RocketMQ: 120 s)."""
    return field(
        default=limits.SERVER_CHANNEL_MAX_IDLE_DEFAULT_S,
        metadata={"java": "serverChannelMaxIdleTimeSeconds", "allowed": TIMEOUT_S},
    )


def partial_frame_timeout_field() -> Any:
    """serverChannelPartialFrameTimeoutSeconds (Shoal): a connection whose request frame is still
    incomplete this long after it began is closed."""
    return field(
        default=limits.PARTIAL_FRAME_TIMEOUT_DEFAULT_S,
        metadata={"java": "serverChannelPartialFrameTimeoutSeconds", "allowed": TIMEOUT_S},
    )


def max_connections_field() -> Any:
    """maxConnections (Shoal): connections beyond this are closed at once (bounded resources)."""
    return field(
        default=limits.SERVER_CONNECTIONS_DEFAULT_MAX_COUNT,
        metadata={"java": "maxConnections", "allowed": CONNECTIONS},
    )


def parse_properties(text: str) -> dict[str, str]:
    """broker.conf / namesrv.conf text, read as Java properties (`shoal.formats.java_properties`),
    with Shoal's two rules on top: every line needs `=` or `:` (a ValueError naming the line: a key
    alone or a whitespace separator is likelier a typo here), and values lose surrounding whitespace."""
    properties = parse_java_properties(text, separator_required=True)
    return {key: value.strip() for key, value in properties.items()}


def _convert(kind: Any, raw: str) -> Any:
    if kind is bool:
        lowered = raw.lower()
        if lowered not in ("true", "false"):
            raise ValueError("expected true or false")
        return lowered == "true"
    if kind is int:
        return int(raw)
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return kind(raw)
    return raw


def parse_settings(cls: type[Any], conf: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """The field values of the settings dataclass `cls` from the keys it knows, each parsed as its
    field's type (bool, int, an Enum, else text) and checked against its `Allowed`; and the keys
    it does not know."""
    by_java = {f.metadata["java"]: f for f in fields(cls)}
    kinds = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    unknown: list[str] = []
    for key, raw in conf.items():
        spec = by_java.get(key)
        if spec is None:
            unknown.append(key)
            continue
        allowed: Allowed = spec.metadata["allowed"]
        try:
            value = _convert(kinds.get(spec.name, str), raw)
        except ValueError:
            raise allowed.refuse(key, raw) from None
        allowed.check(key, raw, value)
        values[spec.name] = value
    return values, unknown


def build_settings(cls: type[Any], conf: Mapping[str, str]) -> tuple[Any, list[str]]:
    """`cls` built from `parse_settings`, and the keys it does not know."""
    values, unknown = parse_settings(cls, conf)
    return cls(**values), unknown


def load_tls_config(conf: Mapping[str, str]) -> TlsSettings:
    """The tls.* keys of a broker.conf or namesrv.conf (and the tls.config.file they name), as a
    `ConfigError` when one is wrong. Certificates are read later, when the ports are set up."""
    try:
        return load_tls_settings({k: v for k, v in conf.items() if is_tls_key(k)})
    except TlsConfigError as error:
        raise ConfigError(str(error)) from None
