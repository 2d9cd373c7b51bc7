"""Replication with ACL everywhere: a NameServer, a master and a slave with aclEnable and the same
plain_acl.yml. The brokers register and the slave syncs metadata with their broker.conf keys (an
admin account), the HA link copies the CommitLog, and no ACL refusal shows in any log."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from shoal.client import Admin, ClientSettings, Message, Producer
from shoal.protocol import RequestCode, ResponseCode
from shoal.remoting import RemotingClient
from tests.acl.conftest import ADMIN, USER
from tests.conftest import Cluster, wait_until
from tests.ports import free_broker_port, free_port

BROKER_NAME = "acl-ha"
HA_CONF = {
    "brokerName": BROKER_NAME,
    "haSendHeartbeatInterval": "500",
    "haHousekeepingInterval": "3000",
    "slaveSyncInterval": "1000",
    "haReconnectInterval": "300",
}


async def admin_request(address: str, code: int) -> tuple[int, bytes]:
    client = RemotingClient(credentials=ADMIN)
    try:
        response = await client.invoke(address, code)
        return response.code, bytes(response.body or b"")
    finally:
        await client.close()


def test_master_and_slave_with_acl_register_sync_and_replicate(
    acl_cluster_factory: Callable[..., Cluster], acl_file: Path, tmp_path: Path
) -> None:
    """Both brokers appear in the cluster; a topic created on the master reaches the slave's config;
    sent messages reach the slave's CommitLog; nothing was refused."""
    master = acl_cluster_factory(namesrv_acl=True, broker_conf=HA_CONF)
    slave_root = tmp_path / "slave"
    slave_root.mkdir()
    slave = Cluster(slave_root, master.namesrv_port, free_broker_port(), free_port())
    slave.start_broker(
        {
            **HA_CONF,
            "brokerRole": "SLAVE",
            "brokerId": "1",
            "aclEnable": "true",
            "plainAclFile": str(acl_file),
            "accessKey": ADMIN.access_key,
            "secretKey": ADMIN.secret_key,
        }
    )
    try:

        async def scenario() -> None:
            settings = ClientSettings(credentials=ADMIN)
            async with Admin(master.namesrv_addr, client_settings=settings) as admin:
                await admin.create_topic(
                    "AclReplicaTopic", broker_addr=master.broker_addr, read_queue_nums=2, write_queue_nums=2
                )
                info = await admin.cluster_info()
            addresses = info.broker_addr_table[BROKER_NAME].broker_addrs
            assert addresses == {0: master.broker_addr, 1: slave.broker_addr}
            producer = Producer(
                "AclReplicaProducer", master.namesrv_addr, client_settings=ClientSettings(credentials=USER)
            )
            await producer.start()
            try:
                for index in range(5):
                    await producer.send(Message("AclTopic", f"replica-{index}".encode()))
            finally:
                await producer.shutdown()

        asyncio.run(_create_user_topic(master))
        asyncio.run(scenario())

        def slave_has_topic() -> bool:
            code, body = asyncio.run(admin_request(slave.broker_addr, RequestCode.GET_ALL_TOPIC_CONFIG))
            return code == ResponseCode.SUCCESS and b"AclReplicaTopic" in body

        wait_until(slave_has_topic, 20.0, 0.2, what="the slave synced the new topic from the master")

        def offsets() -> tuple[str, str]:
            async def both() -> tuple[str, str]:
                async with Admin(master.namesrv_addr, client_settings=ClientSettings(credentials=ADMIN)) as admin:
                    ends = [
                        (await admin.runtime_info(node.broker_addr))["commitLogMaxOffset"] for node in (master, slave)
                    ]
                return ends[0], ends[1]

            return asyncio.run(both())

        wait_until(
            lambda: len(set(offsets())) == 1 and offsets()[0] != "0", 20.0, 0.2, what="the slave's CommitLog caught up"
        )
        for log in (master.log("broker"), master.log("namesrv"), slave.log("broker")):
            assert "ACL refused" not in log and "refused registration" not in log
    finally:
        slave.stop_all()


async def _create_user_topic(cluster: Cluster) -> None:
    async with Admin(cluster.namesrv_addr, client_settings=ClientSettings(credentials=ADMIN)) as admin:
        await admin.create_topic("AclTopic", broker_addr=cluster.broker_addr, read_queue_nums=2, write_queue_nums=2)
