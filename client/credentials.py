"""ACL credentials for clients: `Credentials` and where command lines find them.

`Credentials(access_key, secret_key, security_token=None)` goes into `ClientSettings.credentials`;
every request is then signed (`shoal.protocol.acl_signature`). `resolve_credentials` is the one
rule the CLI uses: flags, else the environment (`SHOAL_ACCESS_KEY` / `SHOAL_SECRET_KEY` /
`SHOAL_SECURITY_TOKEN`), else a credentials file. A file is either RocketMQ's `conf/tools.yml`
(YAML `accessKey:` / `secretKey:`, what mqadmin reads) or Java's SessionCredentials key file
(properties `AccessKey=` / `SecretKey=` / `SecurityToken=`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from shoal.formats.java_properties import parse_java_properties
from shoal.protocol.acl_signature import Credentials

__all__ = ["CREDENTIALS_FILE_SIZE_MAX_BYTES", "Credentials", "credentials_from_file", "resolve_credentials"]

CREDENTIALS_FILE_SIZE_MAX_BYTES = 64 * 1024
"""A credentials file holds three short lines; anything larger is the wrong file."""

_FILE_KEYS = {
    "accessKey": "access_key",
    "AccessKey": "access_key",
    "secretKey": "secret_key",
    "SecretKey": "secret_key",
    "securityToken": "security_token",
    "SecurityToken": "security_token",
}


def credentials_from_file(path: str | Path) -> Credentials:
    """Credentials from a tools.yml-style YAML file or a SessionCredentials properties file.

    Raises ValueError naming the file and what is wrong (missing key, not a mapping, too large).
    """
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > CREDENTIALS_FILE_SIZE_MAX_BYTES:
            raise ValueError(f"{path}: {size} bytes, more than a credentials file holds")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: cannot read credentials: {error}") from None
    data: object
    import yaml  # noqa: PLC0415  (only a credentials file needs it; the CLI must import without it)

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        data = None
    if not isinstance(data, Mapping):
        try:
            data = parse_java_properties(text)
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from None
    found: dict[str, str] = {}
    for key, value in data.items():
        name = _FILE_KEYS.get(str(key))
        if name is not None and value is not None:
            found[name] = str(value).strip()
    if not found.get("access_key") or not found.get("secret_key"):
        raise ValueError(f"{path}: needs accessKey and secretKey (YAML) or AccessKey= and SecretKey= (properties)")
    return Credentials(found["access_key"], found["secret_key"], found.get("security_token") or None)


def resolve_credentials(
    access_key: str | None = None,
    secret_key: str | None = None,
    credentials_file: str | Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> Credentials | None:
    """Flags first, then SHOAL_ACCESS_KEY/SHOAL_SECRET_KEY, then the file; None when none is given.

    One key without the other is a ValueError: an unsigned request would only fail later and less
    clearly at the broker.
    """
    env = os.environ if environ is None else environ
    access_key = access_key or env.get("SHOAL_ACCESS_KEY") or None
    secret_key = secret_key or env.get("SHOAL_SECRET_KEY") or None
    if access_key or secret_key:
        if not (access_key and secret_key):
            raise ValueError("give both an access key and a secret key (--access-key/--secret-key or SHOAL_*)")
        return Credentials(access_key, secret_key, env.get("SHOAL_SECURITY_TOKEN") or None)
    credentials_file = credentials_file or env.get("SHOAL_CREDENTIALS_FILE") or None
    if credentials_file:
        return credentials_from_file(credentials_file)
    return None
