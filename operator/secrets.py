"""The ACL and TLS Secrets a Broker mounts: which ones, whether they hold what the pods need, and
the hash that rolls the pods when their contents change.

Pure: the objects handlers.py read (a cert-manager Certificate, Secrets) in, a `MountedSecrets`
out, or `NotReadyError` naming what is missing. A missing Secret is not an invalid spec: it may be
created after the Broker (cert-manager issues certificates a moment later), so the reconcile
waits and reports Ready=False, reason SecretsUnavailable, and applies nothing until it is there.
Pods never start without their files: an absent key would fail the volume mount, not the broker,
with nothing in the Broker's status.
"""

from __future__ import annotations

import base64
import binascii
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shoal.operator import limits, manifests, status
from shoal.operator.errors import NotReadyError
from shoal.operator.spec import BrokerSpec

CERTIFICATE_API_VERSION = "cert-manager.io/v1"
UNAVAILABLE_REASON = "SecretsUnavailable"


@dataclass(frozen=True)
class MountedSecrets:
    """What the pod templates need from the Secrets, and what the operator's own client needs."""

    tls_secret: str = ""
    """The TLS Secret's name ("" without spec.tls)."""
    digest: str = ""
    """manifests.secrets_hash of the keys the pods mount ("" without spec.acl and spec.tls)."""
    ca_pem: bytes = b""
    """ca.crt of the TLS Secret: the operator's admin client trusts it."""


def tls_secret_name(spec: BrokerSpec, certificate: Mapping[str, Any] | None) -> str:
    """spec.tls.secretName, or the named cert-manager Certificate's spec.secretName."""
    if spec.tls is None:
        return ""
    if spec.tls.secret_name:
        return spec.tls.secret_name
    where = f"cert-manager Certificate {spec.namespace}/{spec.tls.certificate_name}"
    if certificate is None:
        raise NotReadyError(f"{where} (spec.tls.certificateName) does not exist", limits.RETRY_DELAY_S)
    name = str((certificate.get("spec") or {}).get("secretName") or "")
    if not name:
        raise NotReadyError(f"{where} has no spec.secretName", limits.RETRY_DELAY_S)
    return name


def secret_names(spec: BrokerSpec, tls_secret: str) -> list[str]:
    """The Secrets to read, each once."""
    names = [spec.acl.secret_name] if spec.acl is not None else []
    if tls_secret and tls_secret not in names:
        names.append(tls_secret)
    return names


def _wanted_keys(spec: BrokerSpec, tls_secret: str) -> dict[str, list[str]]:
    wanted: dict[str, list[str]] = {}
    if spec.acl is not None:
        wanted.setdefault(spec.acl.secret_name, []).extend([spec.acl.key, *manifests.BROKER_CREDENTIAL_KEYS])
    if tls_secret:
        wanted.setdefault(tls_secret, []).extend(manifests.TLS_KEYS)
    return wanted


def mounted_secrets(spec: BrokerSpec, tls_secret: str, found: Mapping[str, Mapping[str, Any] | None]) -> MountedSecrets:
    """Check every Secret holds its keys, non-empty; the hash of exactly those keys' data (so an
    unrelated key added to the Secret does not restart brokers)."""
    wanted = _wanted_keys(spec, tls_secret)
    if not wanted:
        return MountedSecrets()
    problems: list[str] = []
    hashed: dict[str, dict[str, str]] = {}
    for name, keys in wanted.items():
        secret = found.get(name)
        if secret is None:
            problems.append(f"Secret {spec.namespace}/{name} does not exist")
            continue
        data = secret.get("data") or {}
        missing = [key for key in keys if not data.get(key)]
        if missing:
            problems.append(f"Secret {spec.namespace}/{name} has no (or an empty) {', '.join(missing)}")
            continue
        hashed[name] = {key: str(data[key]) for key in keys}
    if problems:
        raise NotReadyError("; ".join(problems), limits.RETRY_DELAY_S)
    ca_pem = b""
    if tls_secret:
        try:
            ca_pem = base64.b64decode(hashed[tls_secret]["ca.crt"], validate=True)
        except (binascii.Error, ValueError):
            message = f"Secret {spec.namespace}/{tls_secret}: ca.crt is not base64"
            raise NotReadyError(message, limits.RETRY_DELAY_S) from None
        check_certificates(ca_pem, f"Secret {spec.namespace}/{tls_secret}: ca.crt")
    return MountedSecrets(tls_secret=tls_secret, digest=manifests.secrets_hash(hashed), ca_pem=ca_pem)


def check_certificates(pem: bytes, what: str) -> None:
    """NotReadyError unless `pem` holds at least one PEM certificate (the pods and the operator's
    own client would fail every handshake with it)."""
    try:
        ssl.create_default_context(cadata=pem.decode("ascii"))
    except (ssl.SSLError, ValueError):
        raise NotReadyError(f"{what} holds no PEM certificate", limits.RETRY_DELAY_S) from None


def unavailable_status(
    generation: int, message: str, now: str, previous: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """Status of a Broker waiting for its Secrets (Ready and Progressing False, SecretsUnavailable)."""
    return {
        "observedGeneration": generation,
        "conditions": [
            status.condition("Ready", False, UNAVAILABLE_REASON, message, generation, now, previous),
            status.condition("Progressing", False, UNAVAILABLE_REASON, message, generation, now, previous),
        ],
    }
