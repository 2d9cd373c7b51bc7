"""The invariant every test that sends to a real broker can end with: each acknowledged message is
consumable where its send response put it, and `shoal store verify` finds the store clean."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from shoal.formats.message_id import offset_msg_id
from shoal.formats.record import RecordKind, check_record
from shoal.protocol import RemotingCommand, RequestCode, ResponseCode
from shoal.protocol.headers import PullMessageRequestHeader
from shoal.remoting import RemotingClient

CONSUMABLE_TIMEOUT_S = 30.0
VERIFY_TIMEOUT_S = 120.0
PULL_BATCH_MAX_COUNT = 32


@dataclass
class Acknowledged:
    """Where each acknowledged message lies: (topic, queue id) -> queue offset -> offset message id."""

    queues: dict[tuple[str, int], dict[int, str]] = field(default_factory=dict)

    def add(self, topic: str, response: RemotingCommand) -> None:
        """Record a SUCCESS send response (a batch answers a comma list of ids, consecutive offsets)."""
        assert response.code == ResponseCode.SUCCESS, response.remark
        queue = self.queues.setdefault((topic, int(response.ext_fields["queueId"])), {})
        first = int(response.ext_fields["queueOffset"])
        for index, msg_id in enumerate(response.ext_fields["msgId"].split(",")):
            queue[first + index] = msg_id

    @property
    def count(self) -> int:
        return sum(len(queue) for queue in self.queues.values())


async def _pull(client: RemotingClient, address: str, topic: str, queue_id: int, offset: int) -> RemotingCommand:
    header = PullMessageRequestHeader(
        consumer_group="CID_acknowledged_invariant",
        topic=topic,
        queue_id=queue_id,
        queue_offset=offset,
        max_msg_nums=PULL_BATCH_MAX_COUNT,
        sys_flag=4,  # FLAG_SUBSCRIPTION: the subscription below, no heartbeat needed
        commit_offset=0,
        suspend_timeout_ms=0,
        subscription="*",
        sub_version=0,
    )
    return await client.invoke(address, RequestCode.PULL_MESSAGE, header.to_ext_fields(), timeout_s=10.0)


async def assert_consumable(address: str, acknowledged: Acknowledged, timeout_s: float = CONSUMABLE_TIMEOUT_S) -> None:
    """Pull every queue that acknowledged a message; each acknowledged queue offset must come back
    with the offset message id its send response named (dispatch may lag: bounded wait)."""
    client = RemotingClient()
    deadline = time.monotonic() + timeout_s
    try:
        for (topic, queue_id), expected in sorted(acknowledged.queues.items()):
            found: dict[int, str] = {}
            offset = min(expected)
            while offset <= max(expected):
                response = await _pull(client, address, topic, queue_id, offset)
                if response.code == ResponseCode.SUCCESS:
                    found.update(_offset_message_ids(bytes(response.body or b"")))
                    offset = int(response.ext_fields["nextBeginOffset"])
                    continue
                assert time.monotonic() < deadline, (
                    f"{topic}/{queue_id}: acknowledged offsets up to {max(expected)} but the pull at {offset} "
                    f"answers {response.code} {response.remark} after {timeout_s} s"
                )
                await asyncio.sleep(0.05)
            missing = {o: i for o, i in expected.items() if found.get(o) != i}
            assert not missing, f"{topic}/{queue_id}: {len(missing)} acknowledged messages not consumable: {missing}"
    finally:
        await client.close()


def _offset_message_ids(body: bytes) -> dict[int, str]:
    """Queue offset -> offset message id of each record of a pull body, every CRC checked (the
    body is not decompressed: fuzzed messages may claim compression they do not have)."""
    found = {}
    position = 0
    while position < len(body):
        check = check_record(body, position, len(body), check_crc=True)
        assert check.kind is RecordKind.MESSAGE and check.header is not None, check.reason
        found[check.header.queue_offset] = offset_msg_id(check.header.store_host, check.header.physical_offset)
        position += check.size
    return found


def assert_store_verifies(store_dir: Path) -> str:
    """Run `shoal store verify` on the store; it must exit 0 and say `store OK`. Returns its output."""
    done = subprocess.run(
        [sys.executable, "-m", "shoal.cli.main", "store", "verify", str(store_dir)],
        capture_output=True,
        text=True,
        timeout=VERIFY_TIMEOUT_S,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "store OK" in done.stdout, output[-4000:]
    return output
