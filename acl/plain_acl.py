"""plain_acl.yml -> frozen `AclRules` (RocketMQ 4.9.7's PlainPermissionManager.load), pure.

    globalWhiteRemoteAddresses: ["10.10.103.*", "192.168.0.*"]
    accounts:
      - accessKey: RocketMQ            # more than 6 characters, as RocketMQ requires
        secretKey: "12345678"          # idem
        whiteRemoteAddress: ""         # optional; a match skips the signature check
        admin: false
        defaultTopicPerm: DENY         # DENY | PUB | SUB | PUB|SUB (missing: DENY)
        defaultGroupPerm: SUB
        topicPerms: ["topicA=DENY", "topicB=PUB|SUB"]
        groupPerms: ["groupA=DENY", "groupB=SUB"]

Anything else at the top level (dataVersion, ...) is ignored. Every mistake is an `AclFileError`
whose message names the place (`accounts[1].topicPerms[0]`) and what it takes; the caller keeps
its last good rules. Stricter than RocketMQ where it silently guessed: an unknown permission word
is an error (RocketMQ read it as DENY), and an accessKey listed twice is an error (RocketMQ kept
one of them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from shoal.acl import limits
from shoal.acl.address import AddressPattern, parse_address_pattern
from shoal.acl.permission import DENY, parse_perm
from shoal.formats.topics import RETRY_GROUP_TOPIC_PREFIX

__all__ = ["Account", "AclFileError", "AclRules", "parse_plain_acl"]


class AclFileError(ValueError):
    """plain_acl.yml cannot be used; the message names the place and the reason."""


@dataclass(frozen=True, slots=True)
class Account:
    access_key: str
    secret_key: str = field(repr=False)
    white_address: AddressPattern
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    resource_perms: Mapping[str, int]
    """Topic names and `%RETRY%<group>` names -> permission."""


@dataclass(frozen=True, slots=True)
class AclRules:
    global_white: tuple[AddressPattern, ...]
    accounts: Mapping[str, Account]

    def globally_white(self, host: str) -> bool:
        return any(pattern.matches(host) for pattern in self.global_white)


EMPTY_RULES = AclRules((), MappingProxyType({}))


def _text(value: object, where: str, *, min_length: int = 0) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise AclFileError(f"{where}: expected text, found {type(value).__name__}")
    text = str(value)
    if len(text) <= min_length:
        raise AclFileError(f"{where}: {text!r} must be longer than {min_length} characters")
    if len(text) > limits.ACL_KEY_LENGTH_MAX:
        raise AclFileError(f"{where}: longer than {limits.ACL_KEY_LENGTH_MAX} characters")
    return text


def _list(value: object, where: str) -> list[object]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise AclFileError(f"{where}: expected a list, found {type(value).__name__}")
    return value


def _bool(value: object, where: str) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise AclFileError(f"{where}: expected true or false, found {value!r}")


def _perm(value: object, where: str) -> int:
    if value is None:
        return DENY  # RocketMQ: a missing default permits nothing
    if not isinstance(value, str):
        raise AclFileError(f"{where}: expected DENY, PUB, SUB or PUB|SUB, found {value!r}")
    try:
        return parse_perm(value)
    except ValueError as error:
        raise AclFileError(f"{where}: {error}") from None


def _pattern(value: object, where: str) -> AddressPattern:
    if value is not None and not isinstance(value, str):
        raise AclFileError(f"{where}: expected an address pattern as text, found {type(value).__name__}")
    try:
        return parse_address_pattern(value)
    except ValueError as error:
        raise AclFileError(f"{where}: {error}") from None


def _resource_perms(raw: object, where: str, *, groups: bool, into: dict[str, int]) -> None:
    for index, item in enumerate(_list(raw, where)):
        here = f"{where}[{index}]"
        if not isinstance(item, str):
            raise AclFileError(f"{here}: expected 'name=PERM', found {item!r}")
        parts = [part for part in item.split("=") if part]  # StringUtils.split drops empty parts
        if len(parts) != 2 or not parts[0].strip():
            raise AclFileError(f"{here}: {item!r} is not 'name=PERM' (e.g. topicA=PUB|SUB)")
        name = parts[0].strip()
        into[RETRY_GROUP_TOPIC_PREFIX + name if groups else name] = _perm(parts[1], here)


def _account(raw: object, where: str) -> Account:
    if not isinstance(raw, dict):
        raise AclFileError(f"{where}: expected a mapping with accessKey, secretKey, ...")
    perms: dict[str, int] = {}
    _resource_perms(raw.get("topicPerms"), f"{where}.topicPerms", groups=False, into=perms)
    _resource_perms(raw.get("groupPerms"), f"{where}.groupPerms", groups=True, into=perms)
    if "accessKey" not in raw or "secretKey" not in raw:
        raise AclFileError(f"{where}: needs accessKey and secretKey")
    return Account(
        access_key=_text(raw["accessKey"], f"{where}.accessKey", min_length=limits.ACL_KEY_LENGTH_MIN_EXCLUSIVE),
        secret_key=_text(raw["secretKey"], f"{where}.secretKey", min_length=limits.ACL_KEY_LENGTH_MIN_EXCLUSIVE),
        white_address=_pattern(raw.get("whiteRemoteAddress"), f"{where}.whiteRemoteAddress"),
        admin=_bool(raw.get("admin"), f"{where}.admin"),
        default_topic_perm=_perm(raw.get("defaultTopicPerm"), f"{where}.defaultTopicPerm"),
        default_group_perm=_perm(raw.get("defaultGroupPerm"), f"{where}.defaultGroupPerm"),
        resource_perms=MappingProxyType(perms),
    )


def parse_plain_acl(text: str | bytes) -> AclRules:
    """The rules of one plain_acl.yml; an empty file has none (nothing passes but white addresses)."""
    if len(text) > limits.ACL_FILE_SIZE_MAX_BYTES:
        raise AclFileError(f"{len(text)} bytes, more than {limits.ACL_FILE_SIZE_MAX_BYTES}")
    import yaml  # noqa: PLC0415  (only an ACL file needs it; every command must import without it)

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where is not None else ""
        reason = getattr(error, "problem", None) or error.__class__.__name__
        raise AclFileError(f"not YAML{at}: {reason}") from None
    except (ValueError, RecursionError) as error:  # e.g. undecodable bytes
        raise AclFileError(f"not YAML: {error}") from None
    if data is None:
        return EMPTY_RULES
    if not isinstance(data, dict):
        raise AclFileError(
            f"expected a mapping with accounts and globalWhiteRemoteAddresses, found {type(data).__name__}"
        )
    white = tuple(
        _pattern(item, f"globalWhiteRemoteAddresses[{index}]")
        for index, item in enumerate(_list(data.get("globalWhiteRemoteAddresses"), "globalWhiteRemoteAddresses"))
    )
    accounts: dict[str, Account] = {}
    raw_accounts = _list(data.get("accounts"), "accounts")
    if len(raw_accounts) > limits.ACL_ACCOUNTS_MAX_COUNT:
        raise AclFileError(f"accounts: {len(raw_accounts)} accounts, more than {limits.ACL_ACCOUNTS_MAX_COUNT}")
    first_seen: dict[str, int] = {}
    for index, raw in enumerate(raw_accounts):
        account = _account(raw, f"accounts[{index}]")
        if account.access_key in first_seen:
            raise AclFileError(
                f"accounts[{index}].accessKey: {account.access_key!r} is already "
                f"accounts[{first_seen[account.access_key]}]"
            )
        first_seen[account.access_key] = index
        accounts[account.access_key] = account
    return AclRules(white, MappingProxyType(accounts))
