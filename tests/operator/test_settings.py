"""operator/settings.py: the operator's credentials and NetworkPolicy settings from its environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.operator import settings


def test_admin_credentials_are_read_on_each_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Goal: a rotated Secret applies without a restart. Method: no directory gives None; the mounted
    files give the keys (trailing newline dropped); rewritten files give the new keys at once."""
    monkeypatch.setenv("SHOAL_ADMIN_CREDENTIALS_DIR", str(tmp_path / "absent"))
    assert settings.admin_credentials() is None
    monkeypatch.setenv("SHOAL_ADMIN_CREDENTIALS_DIR", str(tmp_path))
    (tmp_path / "accessKey").write_text("shoal-operator\n")
    (tmp_path / "secretKey").write_text("first-secret\n")
    assert settings.admin_credentials() == ("shoal-operator", "first-secret")
    (tmp_path / "secretKey").write_text("rotated-secret")
    assert settings.admin_credentials() == ("shoal-operator", "rotated-secret")


def test_empty_admin_credentials_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty key file is an error naming the directory, never an unsigned client."""
    monkeypatch.setenv("SHOAL_ADMIN_CREDENTIALS_DIR", str(tmp_path))
    (tmp_path / "accessKey").write_text("shoal-operator")
    (tmp_path / "secretKey").write_text("\n")
    with pytest.raises(ValueError, match="must both be non-empty"):
        settings.admin_credentials()


def test_network_policy_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset: disabled; the chart's JSON: enabled with its peers and the operator's namespace; not an
    object: an error."""
    monkeypatch.delenv("SHOAL_NETWORK_POLICY", raising=False)
    assert settings.network_policy() == settings.NetworkPolicySettings()
    monkeypatch.setenv("POD_NAMESPACE", "shoal-system")
    monkeypatch.setenv("SHOAL_NETWORK_POLICY", '{"enabled": true, "clients": [{"podSelector": {}}], "metrics": []}')
    parsed = settings.network_policy()
    assert parsed == settings.NetworkPolicySettings(True, ({"podSelector": {}},), (), "shoal-system")
    monkeypatch.setenv("SHOAL_NETWORK_POLICY", "[1]")
    with pytest.raises(ValueError, match="JSON object"):
        settings.network_policy()
