"""`shoal admin` / `shoal produce` with ACL: flags, environment and a credentials file sign requests;
without them the broker's refusal is shown in one line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner

from shoal.cli.main import cli
from tests.acl.conftest import ADMIN, USER
from tests.conftest import Cluster


def test_admin_and_produce_take_credentials_from_flags_env_and_file(
    acl_cluster_factory: Callable[..., Cluster], tmp_path: Path
) -> None:
    """Admin flags create a topic; the user's keys from env produce; a tools.yml works; none: NO_PERMISSION."""
    cluster = acl_cluster_factory()
    runner = CliRunner()
    namesrv = ["-n", cluster.namesrv_addr]
    flags = ["--access-key", ADMIN.access_key, "--secret-key", ADMIN.secret_key]
    created = runner.invoke(cli, ["admin", *flags, "topic-create", *namesrv, "AclTopic", "--queues", "2"])
    assert created.exit_code == 0, created.output

    refused = runner.invoke(
        cli, ["admin", "topic-create", *namesrv, "Other", "--queues", "2"], env={"SHOAL_ACCESS_KEY": ""}
    )
    assert refused.exit_code != 0 and "No accessKey is configured" in refused.output

    env = {"SHOAL_ACCESS_KEY": USER.access_key, "SHOAL_SECRET_KEY": USER.secret_key}
    produced = runner.invoke(cli, ["produce", *namesrv, "AclTopic", "-c", "2"], env=env)
    assert produced.exit_code == 0, produced.output

    denied = runner.invoke(cli, ["admin", "topic-create", *namesrv, "Other", "--queues", "2"], env=env)
    assert denied.exit_code != 0 and "Need admin permission for request code=17" in denied.output

    tools = tmp_path / "tools.yml"
    tools.write_text(f"accessKey: {ADMIN.access_key}\nsecretKey: {ADMIN.secret_key}\n")
    from_file = runner.invoke(cli, ["admin", "--credentials-file", str(tools), "topic-stats", *namesrv, "AclTopic"])
    assert from_file.exit_code == 0, from_file.output

    half = runner.invoke(cli, ["produce", "--access-key", "onlyTheKey", *namesrv, "AclTopic"], env={})
    assert half.exit_code != 0 and "give both an access key and a secret key" in half.output
