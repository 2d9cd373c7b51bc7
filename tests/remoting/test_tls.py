"""TLS settings under RocketMQ 4.9.7's names (TlsSystemConfig, TlsHelper) and the one-line errors
for certificate files that are missing, unreadable or do not match."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from shoal.remoting.tls import (
    ClientAuth,
    ClientTlsSettings,
    ServerTlsSettings,
    TlsConfigError,
    TlsMode,
    load_tls_settings,
    parse_tls_settings,
)
from tests.tls_certs import TlsFiles, make_tls_files


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


def test_defaults_are_rocketmqs() -> None:
    """Goal: with no keys, the settings are TlsSystemConfig's defaults. Method: parse an empty conf."""
    settings = parse_tls_settings({})
    assert settings.server.mode is TlsMode.PERMISSIVE and settings.server.test_mode
    assert settings.server.need_client_auth is ClientAuth.NONE and not settings.server.auth_client
    assert not settings.client.enable and not settings.client.auth_server and not settings.ha_enable
    assert settings.server.context() is None  # no certificate: plain only


def test_file_values_win_except_mode_and_enable() -> None:
    """Goal: tls.config.file overrides the conf's keys, as TlsHelper.extractTlsConfigFromFile does,
    but never tls.server.mode or tls.enable. Method: the same keys in both, different values."""
    conf = {"tls.server.mode": "enforcing", "tls.server.certPath": "/conf.pem", "tls.enable": "false"}
    file_conf = {"tls.server.mode": "disabled", "tls.server.certPath": "/file.pem", "tls.enable": "true"}
    settings = parse_tls_settings(conf, file_conf)
    assert settings.server.mode is TlsMode.ENFORCING
    assert settings.server.cert_path == "/file.pem"
    assert settings.client.enable is False


def test_enforcing_server_turns_the_brokers_own_client_tls_on_unless_use_tls_says_otherwise() -> None:
    """Goal: BrokerStartup's rule: useTLS defaults to tls.enable, which defaults to mode == enforcing.
    Method: parse each combination."""
    assert parse_tls_settings({"tls.server.mode": "enforcing"}).client.enable
    assert not parse_tls_settings({"tls.server.mode": "permissive"}).client.enable
    assert not parse_tls_settings({"tls.server.mode": "enforcing", "useTLS": "false"}).client.enable
    assert parse_tls_settings({"tls.enable": "true"}).client.enable


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("tls.server.mode", "strict", "disabled or permissive or enforcing"),
        ("tls.enable", "yes", "true or false"),
        ("tls.server.need.client.auth", "always", "none or optional or require"),
    ],
)
def test_bad_values_are_one_line_errors_naming_the_key(key: str, value: str, words: str) -> None:
    """Goal: a value RocketMQ would silently read as a default is refused here, naming key and value.
    Method: parse each bad value."""
    with pytest.raises(TlsConfigError) as caught:
        parse_tls_settings({key: value})
    message = str(caught.value)
    assert "\n" not in message and key in message and repr(value) in message and words in message


def test_a_named_config_file_that_is_missing_is_an_error_but_the_default_one_may_be(tmp_path: Path) -> None:
    """Goal: RocketMQ skips a missing /etc/rocketmq/tls.properties; a file the conf names must exist.
    Method: load with a missing named file, then with a real one."""
    missing = tmp_path / "nope.properties"
    with pytest.raises(TlsConfigError, match=f"tls.config.file={missing}: cannot read it"):
        load_tls_settings({"tls.config.file": str(missing)})
    present = tmp_path / "tls.properties"
    present.write_text("# comment\ntls.test.mode.enable=false\ntls.server.certPath=/x.pem\n")
    settings = load_tls_settings({"tls.config.file": str(present)})
    assert settings.server.cert_path == "/x.pem" and not settings.server.test_mode


def test_the_config_file_is_read_as_java_properties_and_each_line_needs_a_separator(tmp_path: Path) -> None:
    """Goal: tls.properties is read as Properties.load reads it (ISO-8859-1, continuations, escapes),
    and a line without = or : is still refused, naming file and line. Method: load two files."""
    present = tmp_path / "tls.properties"
    present.write_bytes(b"tls.server.certPath = /certs/\\\n   server.pem  \ntls.server.keyPassword:p\\u00e4\xdf \n")
    settings = load_tls_settings({"tls.config.file": str(present)})
    assert settings.server.cert_path == "/certs/server.pem" and settings.server.key_password == "p\u00e4\u00df"
    broken = tmp_path / "broken.properties"
    broken.write_text("# comment\ntls.test.mode.enable false\n")
    with pytest.raises(TlsConfigError) as caught:
        load_tls_settings({"tls.config.file": str(broken)})
    assert str(caught.value) == f"tls.config.file={broken}: line 2 'tls.test.mode.enable false' is not key=value"
    broken.write_text("tls.server.keyPassword=\\u00g1\n")
    with pytest.raises(TlsConfigError, match=r"line 1 .* has a malformed \\uxxxx escape"):
        load_tls_settings({"tls.config.file": str(broken)})


def test_missing_unreadable_and_mismatched_certificates_are_one_line_errors(
    tls_files: TlsFiles, tmp_path: Path
) -> None:
    """Goal: every way a certificate cannot be loaded names the key and the file in one line.
    Method: a missing certificate, a key that is not PEM, a key of another certificate, a wrong CA file."""
    good = {"cert_path": str(tls_files.server_cert), "key_path": str(tls_files.server_key)}
    cases = [
        ({**good, "cert_path": str(tmp_path / "gone.pem")}, "tls.server.certPath=.*gone.pem: cannot read it"),
        ({**good, "key_path": str(tls_files.ca)}, "not a matching PEM certificate and private key"),
        ({**good, "key_path": str(tls_files.client_key)}, "not a matching PEM certificate and private key"),
    ]
    for fields, pattern in cases:
        with pytest.raises(TlsConfigError, match=pattern) as caught:
            ServerTlsSettings(mode=TlsMode.PERMISSIVE, **fields).context()  # type: ignore[arg-type]
        assert "\n" not in str(caught.value)
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello\n")
    with pytest.raises(TlsConfigError, match=r"tls\.client\.trustCertPath=.*no PEM certificate"):
        ClientTlsSettings(enable=True, test_mode=False, auth_server=True, trust_cert_path=str(not_pem)).context()


def test_enforcing_without_a_certificate_and_unsupported_client_auth_are_refused(tls_files: TlsFiles) -> None:
    """Goal: settings that would refuse every client, or that Python's ssl cannot honour, fail at
    start. Method: enforcing with no certificate; need.client.auth=require with authClient=false."""
    with pytest.raises(TlsConfigError, match=r"enforcing needs tls\.server\.certPath"):
        ServerTlsSettings(mode=TlsMode.ENFORCING).context()
    with pytest.raises(TlsConfigError, match="authClient=false"):
        ServerTlsSettings(
            mode=TlsMode.PERMISSIVE,
            test_mode=False,
            need_client_auth=ClientAuth.REQUIRE,
            cert_path=str(tls_files.server_cert),
            key_path=str(tls_files.server_key),
        ).context()


def test_contexts_follow_test_mode_and_auth_switches(tls_files: TlsFiles) -> None:
    """Goal: test mode and authServer=false trust any server (InsecureTrustManagerFactory), authServer
    checks the chain; test mode asks clients for no certificate. Method: inspect the contexts."""
    insecure = ClientTlsSettings(enable=True).context()
    assert insecure is not None and insecure.verify_mode == ssl.CERT_NONE and not insecure.check_hostname
    checked = ClientTlsSettings(
        enable=True, test_mode=False, auth_server=True, trust_cert_path=str(tls_files.ca)
    ).context()
    assert checked is not None and checked.verify_mode == ssl.CERT_REQUIRED and not checked.check_hostname
    assert ClientTlsSettings(enable=False).context() is None
    server = ServerTlsSettings(
        test_mode=True,
        need_client_auth=ClientAuth.REQUIRE,
        cert_path=str(tls_files.server_cert),
        key_path=str(tls_files.server_key),
    ).context()
    assert server is not None and server.verify_mode == ssl.CERT_NONE
