"""The broker's metadata JSON files under `<root>/config/` (spec §7), read and written safely.

Files and their managers (each constructor takes its file path explicitly):

    topics.json             TopicConfigTable        {"dataVersion":{..}, "topicConfigTable":{topic: ..}}
    consumerOffset.json     ConsumerOffsetTable     {"offsetTable":{"<topic>@<group>":{queueId: offset}}}
    subscriptionGroup.json  SubscriptionGroupTable  {"dataVersion":{..}, "subscriptionGroupTable":{group: ..}}
    delayOffset.json        DelayOffsetTable        {"offsetTable":{delayLevel: offset}}

Every manager has `load()` (read the file, or its `.bak`), `persist()` (write it safely) and an
in-memory API guarded by a `threading.Lock`. Persisting is explicit: the broker decides when
(RocketMQ persists topics and groups on every change, offsets every few seconds and at shutdown).
Fields Shoal does not interpret (RocketMQ 5.x adds `attributes`, `stateVersion`, `forbiddenTable`,
...) are kept on read and written back unchanged, so a Shoal broker never strips a newer file.

Files are written and read through `shoal.store.json_files`: a crash-safe write (tmp, fsync,
`.bak`, rename, directory fsync) and a tolerant read (`<file>`, else `<file>.bak`, else empty),
fastjson's syntax accepted. After a load from `.bak` the next persist leaves `.bak` alone instead
of copying the unusable `<file>` over the only good copy. Shoal itself writes standard JSON
(quoted keys, sorted, tab-indented), which every Java reader accepts.

Lock order inside a manager: `_persist_lock` before `_lock` (persist snapshots under both, so two
persists never write an older snapshot over a newer one).
"""

from __future__ import annotations

import abc
import dataclasses
import json
import logging
import re
import threading
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Generic, Protocol, TypeVar

from shoal.formats.consumer_offsets import decode_offset_table, offset_table_key
from shoal.formats.errors import FormatError
from shoal.formats.json_compat import standard_json_value
from shoal.store.json_files import MetadataFormatError, load_first_usable, write_json_file_safely

# SubscriptionGroupManager.init(): present even when the file does not list them (spec §7.5).
BUILTIN_SUBSCRIPTION_GROUPS = (
    "TOOLS_CONSUMER",
    "FILTERSRV_CONSUMER",
    "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PULL",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
)

TOPIC_FILTER_TYPES = frozenset({"SINGLE_TAG", "MULTI_TAG"})

_log = logging.getLogger(__name__)
_T = TypeVar("_T")


def _dumps(document: Mapping[str, Any], pretty: bool) -> str:
    if pretty:
        return json.dumps(document, indent="\t", sort_keys=True, ensure_ascii=False)
    return json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


# --- Field readers: the shape checks every decode uses ---


def _shape_error(where: str, expected: str, value: Any) -> MetadataFormatError:
    found = repr(value)
    found = found if len(found) <= 80 else found[:77] + "..."  # a log line, not a dump
    return MetadataFormatError(f"{where}: expected {expected}, found {found}", expected=expected)


def _object(value: Any, where: str) -> dict[str, Any]:
    """A JSON object whose keys are all strings (a Java bean)."""
    if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
        raise _shape_error(where, "an object with string keys", value)
    return value


def _map(value: Any, where: str) -> dict[Hashable, Any]:
    """A JSON object used as a Java Map (absent or null means empty)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _shape_error(where, "an object", value)
    return value


def _integer(value: Any, where: str) -> int:
    """A Java int/long; fastjson also reads one from a decimal string."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,19}", value):
        return int(value)
    raise _shape_error(where, "an integer", value)


def _int_field(document: Mapping[str, Any], name: str, default: int, where: str) -> int:
    value = document.get(name)
    return default if value is None else _integer(value, f"{where}.{name}")


def _bool_field(document: Mapping[str, Any], name: str, default: bool, where: str) -> bool:
    value = document.get(name)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise _shape_error(f"{where}.{name}", "a boolean", value)


def _str_field(document: Mapping[str, Any], name: str, default: str | None, where: str) -> str:
    value = document.get(name)
    value = default if value is None else value
    if not isinstance(value, str):
        raise _shape_error(f"{where}.{name}", "a string", value)
    return value


def _extra_fields(document: Mapping[str, Any], known: frozenset[str]) -> Mapping[str, Any]:
    return MappingProxyType({name: value for name, value in document.items() if name not in known})


def _no_extra_fields() -> Mapping[str, Any]:
    return MappingProxyType({})


def _java_name(field_name: str) -> str:
    """The Java bean property of a record field: topic_name -> topicName."""
    first, *rest = field_name.split("_")
    return first + "".join(word.capitalize() for word in rest)


_FIELD_READERS: dict[str, Callable[[Mapping[str, Any], str, Any, str], Any]] = {
    "int": _int_field,
    "bool": _bool_field,
    "str": _str_field,
}
_Bean = TypeVar("_Bean", "TopicConfig", "SubscriptionGroupConfig")


def _bean_to_json(bean: TopicConfig | SubscriptionGroupConfig) -> dict[str, Any]:
    """Every field under its Java name, over the preserved unknown fields (fastjson's bean shape)."""
    document: dict[str, Any] = standard_json_value(dict(bean.extra_fields))
    for item in dataclasses.fields(bean):
        if item.name != "extra_fields":
            document[_java_name(item.name)] = getattr(bean, item.name)
    return document


def _bean_from_json(cls: type[_Bean], value: Any, where: str) -> _Bean:
    """Read each field by its Java name (absent or null: the default); keep the other fields."""
    document = _object(value, where)
    values: dict[str, Any] = {}
    for item in dataclasses.fields(cls):
        if item.name != "extra_fields":
            default = None if item.default is dataclasses.MISSING else item.default
            read = _FIELD_READERS[str(item.type)]
            values[item.name] = read(document, _java_name(item.name), default, where)
    known = frozenset(_java_name(name) for name in values)
    return cls(**values, extra_fields=_extra_fields(document, known))


# --- Records ---


@dataclass(frozen=True)
class DataVersion:
    """RocketMQ's DataVersion: bumped on every change so the nameserver sees new topic sets."""

    counter: int = 0
    timestamp_ms: int = 0
    extra_fields: Mapping[str, Any] = field(default_factory=_no_extra_fields, hash=False, repr=False)
    """Fields of newer RocketMQ versions (5.x `stateVersion`), kept as read."""

    def next_version(self, now_ms: int) -> DataVersion:
        """DataVersion.nextVersion(): counter + 1, timestamp = now."""
        return replace(self, counter=self.counter + 1, timestamp_ms=now_ms)

    def to_json(self) -> dict[str, Any]:
        return {
            **standard_json_value(dict(self.extra_fields)),
            "counter": self.counter,
            "timestamp": self.timestamp_ms,
        }

    @classmethod
    def from_json(cls, value: Any, where: str = "dataVersion") -> DataVersion:
        document = _object(value, where)
        return cls(
            counter=_int_field(document, "counter", 0, where),
            timestamp_ms=_int_field(document, "timestamp", 0, where),
            extra_fields=_extra_fields(document, frozenset({"counter", "timestamp"})),
        )


@dataclass(frozen=True)
class TopicConfig:
    """One topic (spec §7.3). `perm` holds PermName bits: 4 read, 2 write, 1 inherit."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = 6
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    extra_fields: Mapping[str, Any] = field(default_factory=_no_extra_fields, hash=False, repr=False)
    """Fields of newer RocketMQ versions (5.x `attributes`), kept as read."""

    @property
    def name(self) -> str:
        return self.topic_name

    @property
    def attributes(self) -> dict[str, str]:
        """5.x `attributes` (`message.type`, ...): the string entries of that field, as read."""
        raw = self.extra_fields.get("attributes")
        if not isinstance(raw, Mapping):
            return {}
        return {str(key): value for key, value in raw.items() if isinstance(value, str)}

    def with_attributes(self, attributes: Mapping[str, str]) -> TopicConfig:
        """This topic with `attributes` in place of its own (none: the field is dropped, as 4.9.7 writes)."""
        extra = {key: value for key, value in self.extra_fields.items() if key != "attributes"}
        if attributes:
            extra["attributes"] = dict(sorted(attributes.items()))
        return replace(self, extra_fields=extra)

    def to_json(self) -> dict[str, Any]:
        """order, perm, readQueueNums, topicFilterType, topicName, topicSysFlag, writeQueueNums."""
        return _bean_to_json(self)

    @classmethod
    def from_json(cls, value: Any, where: str = "topicConfig") -> TopicConfig:
        config = _bean_from_json(cls, value, where)
        if config.topic_filter_type not in TOPIC_FILTER_TYPES:
            raise _shape_error(f"{where}.topicFilterType", "SINGLE_TAG or MULTI_TAG", config.topic_filter_type)
        return config


@dataclass(frozen=True)
class SubscriptionGroupConfig:
    """One consumer group's settings (spec §7.5), RocketMQ's defaults."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    extra_fields: Mapping[str, Any] = field(default_factory=_no_extra_fields, hash=False, repr=False)
    """Fields of newer RocketMQ versions (5.x `groupRetryPolicy`, `attributes`, ...), kept as read."""

    @property
    def name(self) -> str:
        return self.group_name

    def to_json(self) -> dict[str, Any]:
        """brokerId, consumeBroadcastEnable, consumeEnable, consumeFromMinEnable, groupName,
        notifyConsumerIdsChangedEnable, retryMaxTimes, retryQueueNums, whichBrokerWhenConsumeSlowly."""
        return _bean_to_json(self)

    @classmethod
    def from_json(cls, value: Any, where: str = "subscriptionGroupConfig") -> SubscriptionGroupConfig:
        return _bean_from_json(cls, value, where)


# --- Managers ---


class _MetadataFile(abc.ABC, Generic[_T]):
    """load/persist/encode shared by the managers; `_T` is what `_decode` makes of a document.

    Decoding is pure and happens before the lock is taken, so a bad document never leaves a
    table half-replaced (and a bad `<file>` falls back to `.bak` as a whole).
    """

    _FIELDS: frozenset[str] = frozenset()

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._persist_lock = threading.Lock()
        self._extra_fields: Mapping[str, Any] = _no_extra_fields()
        self._backup_is_the_good_copy = False

    def load(self) -> bool:
        """Read the file (or its `.bak`); False when neither is usable and the table stays as is."""
        loaded = load_first_usable(self.path, self._decode_document)
        if loaded is None:
            return False
        (state, extra_fields), source = loaded
        with self._persist_lock, self._lock:
            self._install_locked(state)
            self._extra_fields = extra_fields
            self._backup_is_the_good_copy = source != self.path
        _log.info("loaded %s", source)
        return True

    def persist(self) -> None:
        """Write the current table with the safe-write procedure; an OSError propagates."""
        with self._persist_lock:
            text = self.encode(pretty=True)
            write_json_file_safely(self.path, text, keep_backup=not self._backup_is_the_good_copy)
            self._backup_is_the_good_copy = False

    def encode(self, pretty: bool = False) -> str:
        """The document as standard JSON: sorted quoted keys; tab-indented when `pretty`."""
        with self._lock:
            document = {**standard_json_value(dict(self._extra_fields)), **self._document_locked()}
        return _dumps(document, pretty)

    def _decode_document(self, value: Any) -> tuple[_T, Mapping[str, Any]]:
        document = _object(value, "document")
        return self._decode(document), _extra_fields(document, self._FIELDS)

    @abc.abstractmethod
    def _decode(self, document: Mapping[str, Any]) -> _T: ...

    @abc.abstractmethod
    def _install_locked(self, state: _T) -> None: ...

    @abc.abstractmethod
    def _document_locked(self) -> dict[str, Any]: ...


def _queue_offsets(value: Any, where: str) -> dict[int, int]:
    """{queueId or level: offset}; keys unquoted (Java) or quoted (standard JSON)."""
    offsets: dict[int, int] = {}
    for key, offset in _map(value, where).items():
        offsets[_integer(key, f"{where} key")] = _integer(offset, f"{where}[{key!r}]")
    return offsets


class ConsumerOffsetTable(_MetadataFile[dict[str, dict[int, int]]]):
    """`config/consumerOffset.json`: the next offset each group consumes, per topic and queue.

    Keys are `<topic>@<group>`; a name containing `@` or a negative queue id is a ValueError.
    `load` replaces the table, as ConsumerOffsetManager.decode does. Entries whose key has no
    `@` are kept but never matched.
    """

    _FIELDS = frozenset({"offsetTable"})

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._offsets: dict[str, dict[int, int]] = {}

    @staticmethod
    def _key(group: str, topic: str) -> str:
        return offset_table_key(topic, group)

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Store exactly the offset the client sent (the next one to consume)."""
        if queue_id < 0:
            raise ValueError(f"queue id must be >= 0, not {queue_id}")
        key = self._key(group, topic)
        with self._lock:
            self._offsets.setdefault(key, {})[queue_id] = offset

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when the group never committed one for this queue."""
        key = self._key(group, topic)
        with self._lock:
            return self._offsets.get(key, {}).get(queue_id, -1)

    def offsets_of_group(self, group: str, topic: str) -> dict[int, int]:
        """{queueId: offset} of the group on the topic (empty when unknown)."""
        key = self._key(group, topic)
        with self._lock:
            return dict(self._offsets.get(key, {}))

    def topics_of_group(self, group: str) -> set[str]:
        with self._lock:
            return {topic for topic, entry_group in self._pairs_locked() if entry_group == group}

    def groups_of_topic(self, topic: str) -> set[str]:
        with self._lock:
            return {group for entry_topic, group in self._pairs_locked() if entry_topic == topic}

    def remove_group(self, group: str) -> int:
        """Forget every offset of the group; returns how many topic entries went."""
        return self._remove_where(lambda _topic, entry_group: entry_group == group)

    def remove_topic(self, topic: str) -> int:
        """Forget every group's offsets on the topic; returns how many group entries went."""
        return self._remove_where(lambda entry_topic, _group: entry_topic == topic)

    def all(self) -> dict[str, dict[int, int]]:
        with self._lock:
            return {key: dict(offsets) for key, offsets in self._offsets.items()}

    def _pairs_locked(self) -> list[tuple[str, str]]:
        pairs = [key.partition("@") for key in self._offsets]
        return [(topic, group) for topic, separator, group in pairs if separator]

    def _remove_where(self, matches: Callable[[str, str], bool]) -> int:
        with self._lock:
            doomed = [f"{topic}@{group}" for topic, group in self._pairs_locked() if matches(topic, group)]
            for key in doomed:
                del self._offsets[key]
            return len(doomed)

    def _decode(self, document: Mapping[str, Any]) -> dict[str, dict[int, int]]:
        try:
            return decode_offset_table(document)
        except FormatError as error:
            raise MetadataFormatError(str(error)) from None

    def _install_locked(self, state: dict[str, dict[int, int]]) -> None:
        self._offsets = state

    def _document_locked(self) -> dict[str, Any]:
        return {"offsetTable": {key: dict(offsets) for key, offsets in self._offsets.items()}}


class _NamedConfig(Protocol):
    @property
    def name(self) -> str: ...

    def to_json(self) -> dict[str, Any]: ...


_C = TypeVar("_C", bound=_NamedConfig)


class _VersionedTable(_MetadataFile[tuple[DataVersion, dict[str, _C]]]):
    """A name -> config table whose DataVersion moves on every change (topics, groups).

    `load` merges the file over the table, as Java's `putAll` does, so entries present before
    the load (the built-in groups) stay unless the file has them too.
    """

    _TABLE_FIELD = ""
    _NAME_FIELD = ""

    def __init__(self, path: Path, now_ms: Callable[[], int], from_json: Callable[[Any, str], _C]) -> None:
        super().__init__(path)
        self._now_ms = now_ms
        self._from_json = from_json
        self._data_version = DataVersion(counter=0, timestamp_ms=now_ms())
        self._configs: dict[str, _C] = {}

    @property
    def data_version(self) -> DataVersion:
        with self._lock:
            return self._data_version

    def get(self, name: str) -> _C | None:
        # No lock: one dict lookup is atomic under the GIL, and every change (put, delete, a
        # load's update with str keys) is one C-level dict operation a reader sees whole. Sends
        # read the topic table once each: the lock cost 1.6 % of the loop under load.
        return self._configs.get(name)

    def put(self, config: _C) -> None:
        """Create or replace an entry and bump the data version."""
        assert config.name, "an entry needs a name"
        with self._lock:
            self._configs[config.name] = config
            self._data_version = self._data_version.next_version(self._now_ms())

    def delete(self, name: str) -> _C | None:
        """Remove an entry and return it; the data version moves only when it existed."""
        with self._lock:
            removed = self._configs.pop(name, None)
            if removed is not None:
                self._data_version = self._data_version.next_version(self._now_ms())
            return removed

    def all(self) -> dict[str, _C]:
        with self._lock:
            return dict(self._configs)

    def _decode(self, document: Mapping[str, Any]) -> tuple[DataVersion, dict[str, _C]]:
        version_value = document.get("dataVersion")
        data_version = DataVersion() if version_value is None else DataVersion.from_json(version_value)
        configs: dict[str, _C] = {}
        for name, value in _map(document.get(self._TABLE_FIELD), self._TABLE_FIELD).items():
            where = f"{self._TABLE_FIELD}[{name!r}]"
            if not isinstance(name, str):
                raise _shape_error(where, "a name as key", name)
            configs[name] = self._from_json({self._NAME_FIELD: name, **_object(value, where)}, where)
        return data_version, configs

    def _install_locked(self, state: tuple[DataVersion, dict[str, _C]]) -> None:
        self._data_version, configs = state
        self._configs.update(configs)

    def _document_locked(self) -> dict[str, Any]:
        return {
            "dataVersion": self._data_version.to_json(),
            self._TABLE_FIELD: {name: config.to_json() for name, config in self._configs.items()},
        }


class TopicConfigTable(_VersionedTable[TopicConfig]):
    """`config/topics.json`: every topic of this broker and the table's DataVersion.

    The built-in topics depend on broker settings (cluster and broker names): the broker puts them.
    """

    _FIELDS = frozenset({"dataVersion", "topicConfigTable"})
    _TABLE_FIELD = "topicConfigTable"
    _NAME_FIELD = "topicName"

    def __init__(self, path: Path, now_ms: Callable[[], int]) -> None:
        super().__init__(path, now_ms, TopicConfig.from_json)


class SubscriptionGroupTable(_VersionedTable[SubscriptionGroupConfig]):
    """`config/subscriptionGroup.json`: consumer group settings, starting with the built-in groups.

    Auto-creating unknown groups (autoCreateSubscriptionGroup) is the broker's policy.
    """

    _FIELDS = frozenset({"dataVersion", "subscriptionGroupTable"})
    _TABLE_FIELD = "subscriptionGroupTable"
    _NAME_FIELD = "groupName"

    def __init__(self, path: Path, now_ms: Callable[[], int]) -> None:
        super().__init__(path, now_ms, SubscriptionGroupConfig.from_json)
        for name in BUILTIN_SUBSCRIPTION_GROUPS:
            self._configs[name] = SubscriptionGroupConfig(group_name=name)


class DelayOffsetTable(_MetadataFile[dict[int, int]]):
    """`config/delayOffset.json`: per delay level (1-based) the next offset of SCHEDULE_TOPIC_XXXX
    queue `level - 1` to deliver. `load` merges, as ScheduleMessageService's `putAll` does."""

    _FIELDS = frozenset({"offsetTable"})

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._offsets: dict[int, int] = {}

    def query(self, level: int) -> int:
        """The next offset of the level; 0 when unknown (a level starts at its queue's head)."""
        assert level >= 1, level
        with self._lock:
            return self._offsets.get(level, 0)

    def update(self, level: int, offset: int) -> None:
        assert level >= 1, level
        assert offset >= 0, offset
        with self._lock:
            self._offsets[level] = offset

    def all(self) -> dict[int, int]:
        with self._lock:
            return dict(self._offsets)

    def _decode(self, document: Mapping[str, Any]) -> dict[int, int]:
        return _queue_offsets(document.get("offsetTable"), "offsetTable")

    def _install_locked(self, state: dict[int, int]) -> None:
        self._offsets.update(state)

    def _document_locked(self) -> dict[str, Any]:
        return {"offsetTable": dict(self._offsets)}
