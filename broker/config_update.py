"""GET_BROKER_CONFIG (26) and UPDATE_BROKER_CONFIG (25): the broker's settings as RocketMQ's
properties text, and changes to them while the broker runs.

RocketMQ's `Configuration` sets any field of its config objects by reflection, bumps a
DataVersion and rewrites the broker's config file; whether a field takes effect depends on whether
some component reads it again. Shoal says which: `HOT_KEYS` lists the keys its components read
on every use, so a change reaches them at once. Any other key is refused (SYSTEM_ERROR, RocketMQ's
code for a failed update) naming the key and why, and nothing of that request is applied.

Settings are frozen dataclasses, and the broker's components share one `BrokerConfig` and one
`StoreSettings`. A hot change is checked on copies (every key and relation, as at load), then
written into those shared instances (`object.__setattr__`): the one place that writes them, so
every reader sees the new value at its next use, as RocketMQ's components see their shared
BrokerConfig change.

The change is persisted the way RocketMQ persists it, by rewriting the broker's config file (the
`-c` file); Shoal rewrites only the changed keys' lines and keeps the rest (comments included),
crash-safely (`.tmp`, `.bak`, rename).
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from shoal.broker.config import BrokerConfig, apply_conf_changes
from shoal.remoting.settings import ConfigError
from shoal.store import StoreSettings
from shoal.store.json_files import write_json_file_safely
from shoal.store.settings import BROKER_CONF_KEYS as STORE_KEYS

HOT_KEYS: dict[str, str] = {
    "autoCreateTopicEnable": "topic auto-creation reads it on every send",
    "autoCreateSubscriptionGroup": "group auto-creation reads it on every heartbeat and pull",
    "brokerPermission": "send and pull read it on every request; the NameServers are told at once",
    "longPollingEnable": "every suspended pull reads it",
    "shortPollingTimeMills": "every suspended pull reads it",
    "notifyConsumerIdsChangedEnable": "read on every consumer change",
    "rejectTransactionMessage": "read on every half message",
    "transactionTimeOut": "read by every check-back round",
    "transactionCheckMax": "read by every check-back round",
    "regionId": "read on every send",
    "traceOn": "read on every send",
    "maxMessageSize": "read on every put",
    "fileReservedTime": "read by every cleaning round",
    "deleteWhen": "read by every cleaning round",
    "diskMaxUsedSpaceRatio": "read by every cleaning round",
    "cleanResourceInterval": "read before every cleaning round",
    "cleanFileForciblyEnable": "read by every cleaning round",
}
"""Keys a running Shoal broker applies at once, with the reason it can."""

_STORE_GROUPS = ("commitlog", "consume_queue", "index", "flush", "retention")
_JAVA_OF_BROKER_FIELD = {spec.name: spec.metadata["java"] for spec in fields(BrokerConfig)}
_BROKER_KEYS = frozenset(_JAVA_OF_BROKER_FIELD.values())


@dataclass(frozen=True, slots=True)
class DataVersion:
    """RocketMQ's DataVersion of the configuration: bumped by every applied update."""

    timestamp_ms: int
    counter: int = 0

    def to_json(self) -> str:
        """As fastjson writes it (fields in name order)."""
        return f'{{"counter":{self.counter},"timestamp":{self.timestamp_ms}}}'

    def next(self, now_ms: int) -> DataVersion:
        return DataVersion(now_ms, self.counter + 1)


def value_text(value: Any) -> str:
    """A setting as Java's `toString` writes it into properties."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def store_key_values(store: StoreSettings) -> dict[str, str]:
    """Every store key of broker.conf with its effective value (RocketMQ's MessageStoreConfig names)."""
    result: dict[str, str] = {}
    for key, (group, name, _parse) in STORE_KEYS.items():
        value = getattr(getattr(store, group) if group else store, name)
        if key == "mappedFileSizeConsumeQueue":
            value = store.consume_queue.file_size_bytes
        elif key == "storePathCommitLog":
            value = store.commitlog_dir
        elif key == "warmMapedFileEnable":
            value = store.warm_segments
        result[key] = value_text(value)
    return result


SECRET_KEYS = frozenset({"secretKey"})
"""Settings GET_BROKER_CONFIG never shows."""


def config_properties(broker: BrokerConfig, store: StoreSettings) -> dict[str, str]:
    """All settings by their broker.conf names: what GET_BROKER_CONFIG answers."""
    result = {
        java: value_text(getattr(broker, name))
        for name, java in _JAVA_OF_BROKER_FIELD.items()
        if java not in SECRET_KEYS  # any signed account may ask; the broker's secret stays in broker.conf
    }
    result.update(store_key_values(store))
    return dict(sorted(result.items()))


def properties_text(properties: Mapping[str, str]) -> str:
    """MixAll.properties2String: one `key=value` line each."""
    return "".join(f"{key}={value}\n" for key, value in properties.items())


def refusal_of(properties: Mapping[str, str]) -> str | None:
    """Why these keys cannot be applied now, or None. Names every refused key."""
    problems = []
    for key in properties:
        if key not in _BROKER_KEYS and key not in STORE_KEYS:
            problems.append(f"{key} is not a setting of this broker (Shoal does not use it)")
        elif key not in HOT_KEYS:
            problems.append(
                f"{key} cannot change while the broker runs (Shoal reads it at start only); "
                "set it in broker.conf and restart"
            )
    return "; ".join(problems) if problems else None


def checked_update(
    broker: BrokerConfig, store: StoreSettings, properties: Mapping[str, str]
) -> tuple[BrokerConfig, StoreSettings]:
    """Copies of the settings with `properties` applied, each checked as at load; a ConfigError
    names refused keys (`refusal_of`) or the first bad value or relation."""
    refusal = refusal_of(properties)
    if refusal is not None:
        raise ConfigError(refusal)
    return apply_conf_changes(broker, store, properties)


def apply_in_place(live: object, updated: object) -> list[str]:
    """Write the fields where `updated` differs into the shared `live` instance; their names."""
    assert type(live) is type(updated)
    changed = []
    for spec in dataclasses.fields(live):  # type: ignore[arg-type]
        new = getattr(updated, spec.name)
        if getattr(live, spec.name) != new:
            object.__setattr__(live, spec.name, new)
            changed.append(spec.name)
    return changed


def apply_store_in_place(live: StoreSettings, updated: StoreSettings) -> list[str]:
    """`apply_in_place` per store group (the groups are shared by the store's services)."""
    changed = []
    for group in _STORE_GROUPS:
        changed += apply_in_place(getattr(live, group), getattr(updated, group))
    return changed


_KEY_LINE = re.compile(r"\s*([^#!\s=:][^=:\s]*)\s*[=:]")


def rewritten_properties(text: str, changes: Mapping[str, str]) -> str:
    """`text` (a broker.conf) with each changed key's line replaced, new keys appended; other
    lines, comments and order kept. A key written twice keeps its last line (Java's rule) changed."""
    lines = text.splitlines()
    last_line_of: dict[str, int] = {}
    for number, line in enumerate(lines):
        match = _KEY_LINE.match(line)
        if match is not None:
            last_line_of[match.group(1)] = number
    appended: list[str] = []
    for key, value in changes.items():
        found = last_line_of.get(key)
        if found is None:
            appended.append(f"{key}={value}")
        else:
            lines[found] = f"{key}={value}"
    return "".join(f"{line}\n" for line in lines + appended)


def persist_changes(path: Path, changes: Mapping[str, str]) -> None:
    """Rewrite the broker's config file with `changes` (crash-safe; OSError propagates)."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    write_json_file_safely(path, rewritten_properties(text, changes))
