"""TLS settings as RocketMQ 4.9.7 names them, and the `ssl.SSLContext`s built from them.

RocketMQ reads these from JVM system properties and from `tls.config.file` (default
/etc/rocketmq/tls.properties; TlsSystemConfig, TlsHelper). Shoal has no system properties, so the
same keys go in broker.conf / namesrv.conf, and the file is read as RocketMQ reads it: its values
win over the conf's, except `tls.server.mode` and `tls.enable`, which only the conf sets.

    settings = load_tls_settings(conf)                 # TlsConfigError: one line naming the key
    server = settings.server.context()                 # None: no certificate, plain only
    client = settings.client.context()                 # None: tls.enable=false

Server modes (TlsMode): `disabled` serves plain only and closes a TLS handshake; `permissive`
(RocketMQ's default) serves both on one port, told apart by the first byte (0x16 opens a TLS
record); `enforcing` closes plain connections. Shoal serves TLS only with a certificate
(tls.server.certPath and keyPath): RocketMQ's test mode (`tls.test.mode.enable`, default true)
makes itself a self-signed certificate, which Shoal does not (docs/security.md §4).

Client side (`tls.enable`, the Java client's `-Dtls.enable=true`): test mode or
`tls.client.authServer=false` trusts any server certificate, as RocketMQ's
InsecureTrustManagerFactory does; authServer=true checks the chain against
`tls.client.trustCertPath`. RocketMQ never checks the host name (Netty's handler is built
without a peer host); Shoal's `check_hostname` is off by default for the same reason.
"""

from __future__ import annotations

import enum
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from shoal.formats.errors import JavaPropertiesError
from shoal.formats.java_properties import parse_java_properties
from shoal.remoting import limits

__all__ = [
    "ClientTlsSettings",
    "ServerTlsSettings",
    "TlsConfigError",
    "TlsMode",
    "TlsSettings",
    "is_tls_key",
    "load_tls_settings",
    "parse_tls_settings",
]

TLS_CONFIG_FILE_DEFAULT = "/etc/rocketmq/tls.properties"
TLS_HANDSHAKE_FIRST_BYTE = 0x16
"""A TLS record of type handshake starts with this byte; a remoting frame starts with its length,
whose first byte is 0 for any frame under 16 MiB (NettyRemotingServer.HandshakeHandler)."""

E = TypeVar("E", bound=enum.Enum)

_FILE_ONLY_EXCLUDED = ("tls.server.mode", "tls.enable")
"""Keys the tls.config.file does not set (TlsSystemConfig: the file holds the rest)."""


class TlsConfigError(ValueError):
    """A TLS setting Shoal cannot run with: one line naming the key, the value and what it takes."""


class TlsMode(enum.Enum):
    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"


class ClientAuth(enum.Enum):
    """tls.server.need.client.auth (Netty's ClientAuth), case-insensitive."""

    NONE = "none"
    OPTIONAL = "optional"
    REQUIRE = "require"


def is_tls_key(key: str) -> bool:
    """A conf key this module reads (the rest of broker.conf goes elsewhere)."""
    return key.startswith("tls.") or key == "useTLS"


@dataclass(frozen=True)
class ServerTlsSettings:
    """What a listening port serves (RocketMQ's tls.server.* and tls.test.mode.enable)."""

    mode: TlsMode = TlsMode.PERMISSIVE
    """tls.server.mode; RocketMQ's default."""
    test_mode: bool = True
    """tls.test.mode.enable: clients are never asked for a certificate (RocketMQ: also a self-signed
    server certificate, which Shoal does not make)."""
    need_client_auth: ClientAuth = ClientAuth.NONE
    cert_path: str = ""
    """PEM certificate chain (tls.server.certPath)."""
    key_path: str = ""
    """PEM private key (tls.server.keyPath), PKCS#8 as RocketMQ wants it; Shoal also reads PKCS#1."""
    key_password: str = ""
    auth_client: bool = False
    """tls.server.authClient: check client certificates against trust_cert_path."""
    trust_cert_path: str = ""

    @property
    def has_certificate(self) -> bool:
        return bool(self.cert_path or self.key_path)

    @property
    def serves_tls(self) -> bool:
        return self.mode is not TlsMode.DISABLED and self.has_certificate

    def context(self) -> ssl.SSLContext | None:
        """The server context, or None when this port serves plain only. TlsConfigError when a
        file is missing or unreadable, or the certificate and key do not match."""
        if self.mode is TlsMode.DISABLED:
            return None
        if not self.has_certificate:
            if self.mode is TlsMode.ENFORCING:
                raise TlsConfigError(
                    "tls.server.mode=enforcing needs tls.server.certPath and tls.server.keyPath: Shoal makes no "
                    "self-signed certificate (RocketMQ's tls.test.mode.enable does); give it a certificate"
                )
            return None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        _load_chain(context, "tls.server", self.cert_path, self.key_path, self.key_password)
        auth = ClientAuth.NONE if self.test_mode else self.need_client_auth
        if auth is ClientAuth.NONE:
            context.verify_mode = ssl.CERT_NONE
            return context
        if not self.auth_client:
            raise TlsConfigError(
                f"tls.server.need.client.auth={auth.value} with tls.server.authClient=false (accept any client "
                "certificate) is not supported by Shoal: set tls.server.authClient=true and tls.server.trustCertPath"
            )
        _load_trust(context, "tls.server.trustCertPath", self.trust_cert_path, ssl.Purpose.CLIENT_AUTH)
        context.verify_mode = ssl.CERT_REQUIRED if auth is ClientAuth.REQUIRE else ssl.CERT_OPTIONAL
        return context


@dataclass(frozen=True)
class ClientTlsSettings:
    """How this side connects (tls.enable / useTLS and tls.client.*)."""

    enable: bool = False
    """tls.enable (the Java client's -Dtls.enable=true; the broker's useTLS)."""
    test_mode: bool = True
    """tls.test.mode.enable: trust any server, present no certificate (RocketMQ's default)."""
    auth_server: bool = False
    """tls.client.authServer: check the server's chain against trust_cert_path."""
    trust_cert_path: str = ""
    cert_path: str = ""
    key_path: str = ""
    key_password: str = ""
    check_hostname: bool = False
    """Shoal: also check the server certificate's name (RocketMQ never does); needs auth_server."""

    def context(self) -> ssl.SSLContext | None:
        """The client context, or None when tls.enable is false."""
        if not self.enable:
            return None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        verify = self.auth_server and not self.test_mode
        context.check_hostname = verify and self.check_hostname
        if verify:
            _load_trust(context, "tls.client.trustCertPath", self.trust_cert_path, ssl.Purpose.SERVER_AUTH)
            context.verify_mode = ssl.CERT_REQUIRED
        else:
            context.verify_mode = ssl.CERT_NONE
        if not self.test_mode and (self.cert_path or self.key_path):
            _load_chain(context, "tls.client", self.cert_path, self.key_path, self.key_password)
        return context


@dataclass(frozen=True)
class TlsSettings:
    server: ServerTlsSettings = field(default_factory=ServerTlsSettings)
    client: ClientTlsSettings = field(default_factory=ClientTlsSettings)
    ha_enable: bool = False
    """Shoal's `tls.ha.enable`: the HA port follows tls.server.mode and a slave connects with TLS.
    RocketMQ 4.9.7's HA link is always plain (HAService uses bare NIO sockets), so a Java master or
    slave cannot pair with a Shoal broker that turns this on."""


def _text(conf: Mapping[str, str], key: str, default: str) -> str:
    return conf.get(key, default).strip()


def _boolean(conf: Mapping[str, str], key: str, default: bool) -> bool:
    raw = conf.get(key)
    if raw is None:
        return default
    lowered = raw.strip().lower()
    if lowered not in ("true", "false"):
        raise TlsConfigError(f"{key}={raw!r} is not allowed: {key} takes true or false")
    return lowered == "true"


def _choice(conf: Mapping[str, str], key: str, kind: type[E], default: E) -> E:
    raw = conf.get(key)
    if raw is None:
        return default
    try:
        return kind(raw.strip().lower())
    except ValueError:
        words = " or ".join(str(member.value) for member in kind)
        raise TlsConfigError(f"{key}={raw!r} is not allowed: {key} takes {words}") from None


def parse_tls_settings(conf: Mapping[str, str], file_conf: Mapping[str, str] | None = None) -> TlsSettings:
    """Settings from conf keys and the tls.config.file's keys (which win, except mode and enable).

    `tls.enable` (and its broker.conf spelling `useTLS`) defaults to true when the server side is
    enforcing, as BrokerStartup sets the broker's own client (NettyClientConfig.useTLS)."""
    merged = {**conf, **{k: v for k, v in (file_conf or {}).items() if k not in _FILE_ONLY_EXCLUDED}}
    mode = _choice(conf, "tls.server.mode", TlsMode, TlsMode.PERMISSIVE)
    test_mode = _boolean(merged, "tls.test.mode.enable", True)
    enable = _boolean(conf, "tls.enable", mode is TlsMode.ENFORCING)
    enable = _boolean(conf, "useTLS", enable)
    server = ServerTlsSettings(
        mode=mode,
        test_mode=test_mode,
        need_client_auth=_choice(merged, "tls.server.need.client.auth", ClientAuth, ClientAuth.NONE),
        cert_path=_text(merged, "tls.server.certPath", ""),
        key_path=_text(merged, "tls.server.keyPath", ""),
        key_password=merged.get("tls.server.keyPassword", ""),
        auth_client=_boolean(merged, "tls.server.authClient", False),
        trust_cert_path=_text(merged, "tls.server.trustCertPath", ""),
    )
    client = ClientTlsSettings(
        enable=enable,
        test_mode=test_mode,
        auth_server=_boolean(merged, "tls.client.authServer", False),
        trust_cert_path=_text(merged, "tls.client.trustCertPath", ""),
        cert_path=_text(merged, "tls.client.certPath", ""),
        key_path=_text(merged, "tls.client.keyPath", ""),
        key_password=merged.get("tls.client.keyPassword", ""),
        check_hostname=_boolean(merged, "tls.client.checkHostname", False),
    )
    return TlsSettings(server, client, _boolean(merged, "tls.ha.enable", False))


def load_tls_settings(conf: Mapping[str, str]) -> TlsSettings:
    """`parse_tls_settings` with the tls.config.file read. The default file missing is fine (RocketMQ
    skips it); a file named in the conf that cannot be read is a TlsConfigError."""
    named = conf.get("tls.config.file")
    path = Path(named.strip() if named is not None else TLS_CONFIG_FILE_DEFAULT)
    file_conf: dict[str, str] = {}
    if named is not None or path.is_file():
        file_conf = _read_properties(path)
    return parse_tls_settings(conf, file_conf)


def _read_properties(path: Path) -> dict[str, str]:
    try:
        with path.open("rb") as handle:
            data = handle.read(limits.TLS_CONFIG_FILE_MAX_BYTES + 1)
    except OSError as error:
        raise TlsConfigError(f"tls.config.file={path}: cannot read it: {error.strerror or error}") from None
    if len(data) > limits.TLS_CONFIG_FILE_MAX_BYTES:
        raise TlsConfigError(f"tls.config.file={path}: larger than {limits.TLS_CONFIG_FILE_MAX_BYTES} bytes")
    try:  # ISO-8859-1, as Properties.load(InputStream) reads it
        properties = parse_java_properties(data.decode("latin-1"), separator_required=True)
    except JavaPropertiesError as error:
        where = f"tls.config.file={path}: line {error.line_number} {error.line!r}"
        raise TlsConfigError(f"{where} {error.reason}") from None
    return {key: value.strip() for key, value in properties.items()}


def _check_file(key: str, path: str) -> None:
    """A missing or unreadable file named by `key`, in one line (ssl's own errors name no file)."""
    if not path:
        raise TlsConfigError(f"{key} is empty: give the path of a PEM file")
    try:
        with open(path, "rb") as handle:
            handle.read(1)
    except OSError as error:
        raise TlsConfigError(f"{key}={path}: cannot read it: {error.strerror or error}") from None
    if os.path.getsize(path) > limits.TLS_PEM_FILE_MAX_BYTES:
        raise TlsConfigError(f"{key}={path}: larger than {limits.TLS_PEM_FILE_MAX_BYTES} bytes, not a PEM file")


def _load_chain(context: ssl.SSLContext, prefix: str, cert_path: str, key_path: str, password: str) -> None:
    _check_file(f"{prefix}.certPath", cert_path)
    _check_file(f"{prefix}.keyPath", key_path)
    try:
        context.load_cert_chain(cert_path, key_path, password or None)
    except ssl.SSLError as error:
        raise TlsConfigError(
            f"{prefix}.certPath={cert_path} and {prefix}.keyPath={key_path}: not a matching PEM certificate and "
            f"private key ({error.reason or error}; a wrong {prefix}.keyPassword?)"
        ) from None


def _load_trust(context: ssl.SSLContext, key: str, path: str, purpose: ssl.Purpose) -> None:
    """The trusted certificates in `path`; none given: the system's, as Netty's default trust manager."""
    if not path:
        context.load_default_certs(purpose)
        return
    _check_file(key, path)
    try:
        context.load_verify_locations(cafile=path)
    except ssl.SSLError as error:
        raise TlsConfigError(f"{key}={path}: no PEM certificate in it ({error.reason or error})") from None
