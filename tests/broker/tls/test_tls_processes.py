"""TLS on real `shoal namesrv` / `shoal broker` processes: permissive serves TLS and plain clients
on the remoting, VIP and NameServer ports; enforcing refuses plain ones with one log line per host;
the broker registers over TLS (useTLS); Shoal-to-Shoal HA over TLS (tls.ha.enable); a missing
certificate is a one-line startup error that leaves the store untouched."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from shoal.cli.main import cli
from shoal.client import ClientSettings, Message, NoRouteError, Producer, PullConsumer, PullStatus, SendStatus
from shoal.protocol import RequestCode, ResponseCode
from shoal.remoting import RemotingClient, RemotingConnectError
from shoal.remoting.tls import ClientTlsSettings
from tests.conftest import Cluster, async_wait_until, wait_until
from tests.ports import free_broker_port, free_port
from tests.tls_certs import TlsFiles, make_tls_files

pytestmark = pytest.mark.slow

WAIT_S = 30.0
TLS_CLIENT = ClientTlsSettings(enable=True)
"""The Java client's -Dtls.enable=true with RocketMQ's defaults: any server certificate trusted."""


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


def tls_conf(files: TlsFiles, mode: str, **extra: str) -> dict[str, str]:
    return {
        "tls.server.mode": mode,
        "tls.server.certPath": str(files.server_cert),
        "tls.server.keyPath": str(files.server_key),
        **extra,
    }


def write_conf(path: Path, conf: dict[str, str]) -> Path:
    path.write_text("".join(f"{key}={value}\n" for key, value in conf.items()))
    return path


class TlsCluster(Cluster):
    """tests/conftest.py's Cluster with the NameServer started from a namesrv.conf."""

    def start_namesrv_with(self, conf: dict[str, str]) -> None:
        path = write_conf(self.root / "namesrv.conf", {"listenHost": "127.0.0.1", **conf})
        self._spawn(
            "namesrv",
            ["namesrv", "-c", str(path), "--port", str(self.namesrv_port)],
            self.namesrv_port,
            "NameServer listening",
        )


@pytest.fixture
def tls_cluster(tmp_path: Path) -> Iterator[TlsCluster]:
    running = TlsCluster(tmp_path, free_port(), free_broker_port(), free_port())
    yield running
    running.stop_all()


def client_settings(tls: ClientTlsSettings | None) -> ClientSettings:
    return ClientSettings(client_ip="127.0.0.1", tls=tls or ClientTlsSettings())


async def round_trip(namesrv: str, topic: str, tls: ClientTlsSettings | None) -> None:
    """Send one message and pull it back through the NameServer's route, over TLS or plain."""
    settings = client_settings(tls)
    body = f"over {'tls' if tls else 'plain'}".encode()
    async with Producer(f"PID_{topic}", namesrv, client_settings=settings) as producer:
        sent = await producer.send(Message(topic, body))
    assert sent.status is SendStatus.SEND_OK
    async with PullConsumer(f"CID_{topic}", namesrv, client_settings=settings) as consumer:
        # the route: the broker registers an auto-created topic a moment after storing the send
        await async_wait_until(lambda: routed(consumer, topic), WAIT_S, 0.1, what=f"route of {topic}")
        pulled = await consumer.pull(sent.message_queue, "*", sent.queue_offset, 1)
    assert pulled.status is PullStatus.FOUND and pulled.messages[0].body == body


async def routed(consumer: PullConsumer, topic: str) -> bool:
    try:
        return bool(await consumer.fetch_message_queues(topic))
    except NoRouteError:
        return False


async def runtime_info(address: str, tls: ClientTlsSettings | None) -> int:
    """GET_BROKER_RUNTIME_INFO straight at one port (main or VIP): its response code."""
    client = RemotingClient(ssl_context=tls.context() if tls else None)
    try:
        return (await client.invoke(address, RequestCode.GET_BROKER_RUNTIME_INFO, timeout_s=5)).code
    finally:
        await client.close()


def test_permissive_serves_tls_and_plain_clients_on_namesrv_remoting_and_vip_ports(
    tls_cluster: TlsCluster, tls_files: TlsFiles
) -> None:
    """Goal: permissive (RocketMQ's default mode) serves both kinds of client on every port, a
    broker with useTLS=true among them. Method: a TLS and a plain shoal.client each send and pull
    back a message through the NameServer's route; both reach the VIP port directly. (That the
    broker's registration itself goes over TLS is proved by the enforcing test below.)"""
    tls_cluster.start_namesrv_with(tls_conf(tls_files, "permissive"))
    tls_cluster.start_broker(tls_conf(tls_files, "permissive", useTLS="true"))
    assert "TLS permissive" in tls_cluster.log("broker")
    assert "TLS permissive" in tls_cluster.log("namesrv")
    asyncio.run(round_trip(tls_cluster.namesrv_addr, "TlsPermissive", TLS_CLIENT))
    asyncio.run(round_trip(tls_cluster.namesrv_addr, "TlsPermissive", None))
    vip = f"127.0.0.1:{tls_cluster.broker_port - 2}"
    assert asyncio.run(runtime_info(vip, TLS_CLIENT)) == ResponseCode.SUCCESS
    assert asyncio.run(runtime_info(vip, None)) == ResponseCode.SUCCESS


def test_enforcing_refuses_plain_clients_with_one_log_line_and_serves_tls(
    tls_cluster: TlsCluster, tls_files: TlsFiles
) -> None:
    """Goal: enforcing on the NameServer and the broker serves TLS clients (the broker's own
    registration included: useTLS follows enforcing) and closes plain ones, logging each host once.
    Method: a TLS round trip; plain requests to the NameServer, remoting and VIP ports fail; each
    process logged one refusal line for 127.0.0.1."""
    tls_cluster.start_namesrv_with(tls_conf(tls_files, "enforcing"))
    tls_cluster.start_broker(tls_conf(tls_files, "enforcing"))
    asyncio.run(round_trip(tls_cluster.namesrv_addr, "TlsEnforcing", TLS_CLIENT))
    for address in (tls_cluster.namesrv_addr, tls_cluster.broker_addr, f"127.0.0.1:{tls_cluster.broker_port - 2}"):
        for _ in range(2):
            with pytest.raises(Exception, match=r"closed|cannot connect"):
                asyncio.run(runtime_info(address, None))
    for name, listeners in (("namesrv", 1), ("broker", 2)):
        refusals = [line for line in tls_cluster.log(name).splitlines() if "closed a plain connection" in line]
        assert len(refusals) == listeners, refusals  # the broker: its remoting and VIP ports, once each
        assert all("127.0.0.1" in line and "tls.server.mode=enforcing" in line for line in refusals)


def test_disabled_broker_refuses_tls_clients_and_serves_plain(tls_cluster: TlsCluster, tls_files: TlsFiles) -> None:
    """Goal: tls.server.mode=disabled serves plain only, even with a certificate configured. Method:
    a plain round trip works; a TLS connection to the broker fails."""
    tls_cluster.start_namesrv_with({})
    tls_cluster.start_broker(tls_conf(tls_files, "disabled"))
    asyncio.run(round_trip(tls_cluster.namesrv_addr, "TlsDisabled", None))
    with pytest.raises(RemotingConnectError, match="over TLS"):
        asyncio.run(runtime_info(tls_cluster.broker_addr, TLS_CLIENT))


def shoal(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shoal.cli.main", *args], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize("missing", ["tls.server.certPath", "tls.server.keyPath"])
def test_missing_certificate_file_is_a_one_line_startup_error_and_the_store_is_untouched(
    tmp_path: Path, tls_files: TlsFiles, missing: str
) -> None:
    """Goal: a broker or NameServer whose certificate or key file is missing exits 1 with one line
    naming the key and the file, before the store is created. Method: run both with the file
    renamed away; check stderr and that the store directory does not exist."""
    conf = tls_conf(tls_files, "permissive")
    conf[missing] = str(tmp_path / "absent.pem")
    store = tmp_path / "store"
    broker_conf = write_conf(
        tmp_path / "broker.conf",
        {**conf, "listenHost": "127.0.0.1", "listenPort": str(free_broker_port()), "storePathRootDir": str(store)},
    )
    namesrv_conf = write_conf(tmp_path / "namesrv.conf", {**conf, "listenPort": str(free_port())})
    for result in (shoal("broker", "-c", str(broker_conf)), shoal("namesrv", "-c", str(namesrv_conf))):
        assert result.returncode == 1, result.stderr
        lines = result.stderr.strip().splitlines()
        assert lines == [f"Error: {missing}={tmp_path / 'absent.pem'}: cannot read it: No such file or directory"]
    assert not store.exists()


def test_ha_link_over_tls_between_shoal_brokers(tls_cluster: TlsCluster, tls_files: TlsFiles, tmp_path: Path) -> None:
    """Goal: with Shoal's tls.ha.enable on both, an enforcing master's HA port takes the slave's TLS
    link and replicates; a slave without it is refused. Method: a master and a TLS slave; a message
    sent to the master appears in the slave's CommitLog (its runtime info's commitLogMaxOffset
    catches up); the master logs the plain HA connection of a second, plain slave as refused."""
    ha_port = free_port()
    tls_cluster.start_namesrv_with(tls_conf(tls_files, "permissive"))
    tls_cluster.start_broker(
        tls_conf(tls_files, "enforcing", **{"tls.ha.enable": "true"})
        | {"haListenPort": str(ha_port), "brokerRole": "ASYNC_MASTER"}
    )
    assert f"HA listener on 127.0.0.1:{ha_port} (TLS enforcing)" in tls_cluster.log("broker")
    slave = start_slave(
        tmp_path / "slave", tls_cluster, ha_port, tls_conf(tls_files, "enforcing", **{"tls.ha.enable": "true"})
    )
    plain_slave = start_slave(tmp_path / "plain-slave", tls_cluster, ha_port, {"brokerId": "2"})
    try:
        asyncio.run(round_trip(tls_cluster.namesrv_addr, "TlsHa", TLS_CLIENT))
        master_end = asyncio.run(commitlog_end(tls_cluster.broker_addr))
        ends: list[int] = []

        def caught_up() -> bool:
            ends.append(asyncio.run(commitlog_end(slave.address)))
            return ends[-1] >= master_end > 0

        try:
            wait_until(caught_up, WAIT_S, 0.2, what="slave catch-up")
        except AssertionError:
            raise AssertionError(f"master end {master_end}, slave ends {ends[-5:]}:\n{slave.log()[-3000:]}") from None
        wait_until(
            lambda: "HA: closed a plain connection from 127.0.0.1" in tls_cluster.log("broker"),
            WAIT_S,
            0.2,
            what="refused plain HA link",
        )
        assert "following master" in slave.log() and "following master" not in plain_slave.log()
    finally:
        slave.stop()
        plain_slave.stop()


class Slave:
    def __init__(self, root: Path, process: subprocess.Popen[bytes], port: int) -> None:
        self.root, self.process, self.port = root, process, port

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log(self) -> str:
        return (self.root / "broker.log").read_text(errors="replace")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


def start_slave(root: Path, master: TlsCluster, ha_port: int, extra: dict[str, str]) -> Slave:
    root.mkdir()
    port = free_broker_port()
    conf = {
        "brokerIP1": "127.0.0.1",
        "listenHost": "127.0.0.1",
        "listenPort": str(port),
        "metricsPort": "-1",
        "haListenPort": str(free_port()),
        "namesrvAddr": master.namesrv_addr,
        "storePathRootDir": str(root / "store"),
        "mappedFileSizeCommitLog": str(64 * 1024 * 1024),
        "brokerRole": "SLAVE",
        "brokerId": "1",
        "haMasterAddress": f"127.0.0.1:{ha_port}",
        "haReconnectInterval": "300",
        **extra,
    }
    path = write_conf(root / "broker.conf", conf)
    with (root / "broker.log").open("wb") as handle:
        process = subprocess.Popen(
            [sys.executable, "-m", "shoal.cli.main", "broker", "-c", str(path)], stdout=handle, stderr=subprocess.STDOUT
        )
    slave = Slave(root, process, port)
    wait_until(lambda: f"listening on port {port}" in slave.log() or process.poll() is not None, WAIT_S, 0.1)
    assert process.poll() is None, slave.log()
    return slave


async def commitlog_end(address: str) -> int:
    """The broker's commitLogMaxOffset from GET_BROKER_RUNTIME_INFO (plain or TLS, whichever it takes)."""
    for tls in (None, TLS_CLIENT):
        client = RemotingClient(ssl_context=tls.context() if tls else None)
        try:
            response = await client.invoke(address, RequestCode.GET_BROKER_RUNTIME_INFO, timeout_s=5)
        except Exception:
            continue
        finally:
            await client.close()
        return int(json.loads(bytes(response.body or b"{}"))["table"]["commitLogMaxOffset"])
    return -1


def test_cli_commands_over_tls(tls_cluster: TlsCluster, tls_files: TlsFiles) -> None:
    """Goal: `shoal admin/produce/consume --tls` (or SHOAL_TLS=true) reach an enforcing cluster, and
    --tls-trust-cert checks the server. Method: create a topic, produce 2 and consume 2 over TLS;
    without --tls the command fails; trusting an unrelated CA fails."""
    tls_cluster.start_namesrv_with(tls_conf(tls_files, "enforcing"))
    tls_cluster.start_broker(tls_conf(tls_files, "enforcing"))
    runner = CliRunner()
    namesrv = ["-n", tls_cluster.namesrv_addr]
    created = runner.invoke(cli, ["admin", "--tls", "topic-create", "CliTls", *namesrv])
    assert created.exit_code == 0, created.output
    produced = runner.invoke(
        cli, ["produce", "--tls-trust-cert", str(tls_files.ca), "CliTls", "-c", "2", *namesrv], env={}
    )
    assert produced.exit_code == 0 and produced.output.count("SEND_OK") == 2, produced.output
    consumed = runner.invoke(
        cli, ["consume", "CliTls", "-c", "2", "--timeout", "15", *namesrv], env={"SHOAL_TLS": "true"}
    )
    assert consumed.exit_code == 0 and consumed.output.count('"body"') == 2, consumed.output
    assert runner.invoke(cli, ["admin", "topics", *namesrv]).exit_code != 0
    wrong_ca = runner.invoke(cli, ["produce", "--tls-trust-cert", str(tls_files.other_ca), "CliTls", *namesrv])
    assert wrong_ca.exit_code != 0 and "SEND_OK" not in wrong_ca.output
