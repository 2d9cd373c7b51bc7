"""`shoal store inspect` and `shoal store verify` on real store directories."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

from click.testing import CliRunner

from shoal.cli.main import cli
from shoal.formats.properties import encode_properties
from shoal.store import MessageStore, MessageToStore, StoreSettings
from tests.cli.conftest import write_segmented_store

HASH_SLOTS = "64"


def _write_store(settings: StoreSettings, count: int) -> None:
    store = MessageStore(settings)
    store.open()
    store.start()
    for number in range(count):
        properties = encode_properties({"TAGS": "TagA", "KEYS": f"key-{number}"})
        assert store.put_message(MessageToStore("CliTopic", number % 2, b"body-%d" % number, properties)).ok
    store.shutdown()


def test_verify_passes_on_a_healthy_store(store_settings: StoreSettings) -> None:
    """Goal: a clean store verifies. Method: write 50 messages, run `shoal store verify`."""
    _write_store(store_settings, 50)
    result = CliRunner().invoke(cli, ["store", "verify", str(store_settings.root_dir), "--hash-slots", HASH_SLOTS])
    assert result.exit_code == 0, result.output
    assert "50 records" in result.output
    assert "50 ConsumeQueue units" in result.output
    assert "store OK" in result.output


def test_verify_fails_and_names_the_damage(store_settings: StoreSettings) -> None:
    """Goal: a flipped body byte is found. Method: corrupt one record's body, expect exit 1 and its offset."""
    _write_store(store_settings, 20)
    segment = sorted((store_settings.root_dir / "commitlog").iterdir())[0]
    data = bytearray(segment.read_bytes())
    data[90] ^= 0xFF  # inside the first record's body (header is 88 bytes, then 'body-0')
    segment.write_bytes(bytes(data))
    result = CliRunner().invoke(cli, ["store", "verify", str(store_settings.root_dir), "--hash-slots", HASH_SLOTS])
    assert result.exit_code == 1
    assert "CommitLog offset 0: body CRC" in result.output
    assert "19 records" in result.output  # checking went on past the damaged record
    assert "store DAMAGED" in result.output


def test_inspect_prints_records_units_and_index_entries(store_settings: StoreSettings) -> None:
    """Goal: inspect decodes all three structures. Method: parse its JSON lines."""
    _write_store(store_settings, 5)
    result = CliRunner().invoke(
        cli, ["store", "inspect", str(store_settings.root_dir), "--limit", "3", "--hash-slots", HASH_SLOTS]
    )
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.output.splitlines() if line.startswith('{"offset"')]
    assert len(records) == 3
    assert records[0]["topic"] == "CliTopic"
    assert records[0]["properties"]["KEYS"] == "key-0"
    assert "# ConsumeQueue CliTopic/0" in result.output
    assert any('"tagsCode": 2598919' in line for line in result.output.splitlines())  # hashCode("TagA")
    assert "# IndexFile" in result.output


def test_help_explains_every_command() -> None:
    """Goal: --help is useful. Method: check the top-level and store help texts."""
    runner = CliRunner()
    top = runner.invoke(cli, ["--help"])
    assert top.exit_code == 0
    assert "demo" in top.output and "store" in top.output
    store_help = runner.invoke(cli, ["store", "--help"])
    assert "inspect" in store_help.output and "verify" in store_help.output


def test_demo_recovers_every_acknowledged_message(tmp_path: Path) -> None:
    """Goal: `make run`'s demo works end to end. Method: run it; it exits 1 if an acked message is missing."""
    result = CliRunner().invoke(cli, ["demo", "--data-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "0 missing" in result.output
    assert "recovery: abnormal" in result.output
    assert "a new write after recovery: PUT_OK" in result.output


def test_verify_goes_on_past_a_record_with_a_damaged_topic(store_settings: StoreSettings) -> None:
    """Goal: damage that breaks decoding does not hide later records. Method: flip a topic byte."""
    _write_store(store_settings, 20)
    segment = sorted((store_settings.root_dir / "commitlog").iterdir())[0]
    data = bytearray(segment.read_bytes())
    data[96] = 0xFF  # inside the first record's topic: not UTF-8 any more
    segment.write_bytes(bytes(data))
    result = CliRunner().invoke(cli, ["store", "verify", str(store_settings.root_dir), "--hash-slots", HASH_SLOTS])
    assert result.exit_code == 1
    assert "19 records" in result.output
    assert "CommitLog offset 0:" in result.output


def test_store_commands_point_at_the_store_inside_a_data_directory(store_settings: StoreSettings) -> None:
    """Goal: `shoal store inspect data` names data/store instead of finding 0 segments. Method:
    write a store under DATA/store, run inspect and verify on DATA and on an empty directory."""
    data = store_settings.root_dir.parent / "data"
    _write_store(replace(store_settings, root_dir=data / "store"), 2)
    for command in ("inspect", "verify"):
        result = CliRunner().invoke(cli, ["store", command, str(data)])
        assert result.exit_code == 1 and f"the store is {data / 'store'}" in result.output, result.output
    not_a_store = data / "elsewhere"
    not_a_store.mkdir()
    empty = CliRunner().invoke(cli, ["store", "inspect", str(not_a_store)])
    assert empty.exit_code == 1 and "no commitlog/" in empty.output


def test_verify_says_what_to_do_about_a_segment_of_the_wrong_size(tmp_path: Path) -> None:
    """Goal: verify names a cut segment and the way out (newest: repaired at start; older: restore or
    move it and later ones aside). Method: three 1 MiB segments, cut the middle, then the newest."""
    root = tmp_path / "store"
    segments = write_segmented_store(root)
    os.truncate(segments[1], 512 * 1024)
    os.truncate(segments[-1], 1000)
    result = CliRunner().invoke(cli, ["store", "verify", str(root), "--hash-slots", HASH_SLOTS])
    assert result.exit_code == 1
    assert f"segment {segments[1].name} is {512 * 1024} bytes where segments are {1024 * 1024}" in result.output
    assert "move it and every later segment out of commitlog/" in result.output
    assert f"segment {segments[-1].name} is 1000 bytes" in result.output
    assert "a broker start extends it with zeros" in result.output
