"""Client credentials: flags, environment and files (tools.yml YAML or SessionCredentials properties)."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.client import ClientSettings, Credentials
from shoal.client.credentials import credentials_from_file, resolve_credentials


def test_flags_win_over_environment_and_file(tmp_path: Path) -> None:
    """Explicit keys are used as given; the environment's token rides along."""
    env = {"SHOAL_ACCESS_KEY": "envak", "SHOAL_SECRET_KEY": "envsk", "SHOAL_SECURITY_TOKEN": "t"}
    assert resolve_credentials("ak", "sk", environ=env) == Credentials("ak", "sk", "t")
    assert resolve_credentials(environ=env) == Credentials("envak", "envsk", "t")
    assert resolve_credentials(environ={}) is None


def test_one_key_without_the_other_is_refused() -> None:
    """An access key alone would only fail later at the broker, less clearly."""
    with pytest.raises(ValueError, match="both"):
        resolve_credentials("ak", None, environ={})


def test_tools_yml_and_properties_files_are_read(tmp_path: Path) -> None:
    """RocketMQ's conf/tools.yml shape and Java's key-file shape both work."""
    tools = tmp_path / "tools.yml"
    tools.write_text("accessKey: RocketMQ\nsecretKey: 12345678\n")
    assert credentials_from_file(tools) == Credentials("RocketMQ", "12345678")
    props = tmp_path / "key"
    props.write_text("# key file\nAccessKey=ak1\nSecretKey = sk1\nSecurityToken=tok\n")
    assert resolve_credentials(credentials_file=props, environ={}) == Credentials("ak1", "sk1", "tok")


def test_a_properties_key_file_is_read_as_java_reads_it(tmp_path: Path) -> None:
    """Goal: SessionCredentials' file is Java properties: whitespace separators, continuations and
    escapes work; a malformed escape is a ValueError naming the file. Method: read two key files."""
    props = tmp_path / "key"
    props.write_text("AccessKey ak\\u0031\nSecretKey = s\\\n    k1\n")
    assert credentials_from_file(props) == Credentials("ak1", "sk1")
    props.write_text("AccessKey=ak\nSecretKey=\\u12\n")
    with pytest.raises(ValueError, match=r"key: line 2: .*malformed"):
        credentials_from_file(props)


def test_a_file_without_keys_names_the_file(tmp_path: Path) -> None:
    """A file missing secretKey is a ValueError that names it."""
    bad = tmp_path / "bad.yml"
    bad.write_text("accessKey: only\n")
    with pytest.raises(ValueError, match=r"bad\.yml.*secretKey"):
        credentials_from_file(bad)
    with pytest.raises(ValueError, match="cannot read"):
        credentials_from_file(tmp_path / "missing")


def test_client_settings_carry_credentials() -> None:
    """ClientSettings.credentials defaults to None and keeps what it is given."""
    assert ClientSettings().credentials is None
    credentials = Credentials("ak", "sk")
    assert ClientSettings(credentials=credentials).credentials is credentials
