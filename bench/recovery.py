"""Recovery benchmark: how long `MessageStore.open()` takes after a SIGKILL, phase by phase.

    python bench/recovery.py [--messages N] [--dir PATH] [--trials K] [--profile] [--baseline CHECKOUT]
                             [--after-burst]

1. A child process writes N messages of 1 KB through `shoal.store.MessageStore` (ASYNC_FLUSH,
   default 1 GiB segments, 4 topics x 4 queues, TAGS, KEYS and a 32-hex-digit UNIQ_KEY as a real
   producer sends), waits until the Dispatcher caught up (ConsumeQueues and index complete, as in
   a broker that ran a while), then SIGKILLs itself: the `abort` marker stays and nothing is shut
   down; the page cache keeps what the mmaps wrote, as after a broker's SIGKILL.
   `--after-burst` is a broker killed seconds after a burst instead (what `vs_rocketmq.py`'s
   recovery cell does): no KEYS (as the Java benchmark client sends), and the SIGKILL comes before
   any checkpoint, so recovery deletes the index file it cannot trust and rebuilds it from the
   unique keys while the ConsumeQueues survive.
2. Each trial copies that store and times `MessageStore.open()` on the copy in a fresh process,
   with the phases it spends in: loading files, ConsumeQueue recovery, the CommitLog scan (with
   the body CRC), index truncation, re-dispatch. `--profile` prints cProfile's top functions.
3. `--baseline CHECKOUT` (e.g. a `git worktree` of an older commit) alternates trials of that
   checkout's `shoal.store` / `shoal.formats` with the current ones on the same filled store,
   and prints the ratio of the medians.

Numbers vary +-15 % between runs on this VM: compare figures taken in the same run.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BODY_BYTES = 1024
BODY_VARIANTS = 256
TOPICS = ("RecoverA", "RecoverB", "RecoverC", "RecoverD")
QUEUES = 4
PROGRESS_EVERY = 100_000
DISPATCH_WAIT_S = 600.0


# --- the child that fills a store and dies --------------------------------------------------------


def fill_and_kill(root: Path, count: int, after_burst: bool) -> None:
    """Write `count` messages, wait for dispatch, SIGKILL ourselves (never returns)."""
    from shoal.formats.properties import encode_properties
    from shoal.store import FlushDiskType, FlushSettings, MessageStore, MessageToStore, StoreSettings

    store = MessageStore(StoreSettings(root_dir=root, flush=FlushSettings(flush_disk_type=FlushDiskType.ASYNC_FLUSH)))
    store.open()
    store.start()
    bodies = [os.urandom(BODY_BYTES) for _ in range(BODY_VARIANTS)]
    client_prefix = os.urandom(10).hex().upper()
    started = time.perf_counter()
    for number in range(count):
        properties = encode_properties(
            {
                "UNIQ_KEY": f"{client_prefix}{number:012X}",
                "WAIT": "true",
                "TAGS": f"Tag{number % 3}",
                **({} if after_burst else {"KEYS": f"order-{number}"}),
            }
        )
        topic = TOPICS[number % len(TOPICS)]
        result = store.append_message(
            MessageToStore(topic, (number // len(TOPICS)) % QUEUES, bodies[number % BODY_VARIANTS], properties)
        )
        if result.append is None:
            raise SystemExit(f"put failed: {result.status} {result.remark}")
        if (number + 1) % PROGRESS_EVERY == 0:
            rate = (number + 1) / (time.perf_counter() - started)
            print(f"  filled {number + 1} messages ({rate:.0f} msgs/s)", file=sys.stderr, flush=True)
    deadline = time.monotonic() + DISPATCH_WAIT_S
    while store.dispatch_behind_bytes and time.monotonic() < deadline:
        time.sleep(0.05)
    if store.dispatch_behind_bytes:
        raise SystemExit("dispatch did not catch up")
    if not after_burst:
        store.flush_consume_queues()  # what a broker that ran a while has: ConsumeQueues and checkpoint current
    print(f"  filled {count} messages, {store.max_offset} CommitLog bytes; SIGKILL", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


# --- the child that recovers ----------------------------------------------------------------------


def recover(root: Path, profile: bool) -> dict[str, Any]:
    """Open the store at `root` once; seconds per phase and the report's figures."""
    from shoal.store import MessageStore, StoreSettings

    store = MessageStore(StoreSettings(root_dir=root))
    profiler = cProfile.Profile() if profile else None
    started = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    report = store.open()
    if profiler is not None:
        profiler.disable()
    total = time.perf_counter() - started
    result: dict[str, Any] = {
        "total_s": total,
        "phases_s": report.phases_s,
        "redispatched": report.messages_redispatched,
        "scan_start": report.scan_start_offset,
        "end": report.recovered_end_offset,
        "lossless": report.lossless,
        "records_decoded": getattr(report, "messages_redispatch_decoded", None),
    }
    if profiler is not None:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(18)
        result["profile"] = text.getvalue()
    store.shutdown()  # the copy is thrown away
    return result


# --- the driver -----------------------------------------------------------------------------------


def _shim(checkout: Path, work: Path) -> Path:
    """A directory that, first on PYTHONPATH, makes `shoal.store` and `shoal.formats` the checkout's."""
    shim = work / "baseline-path"
    (shim / "shoal").mkdir(parents=True)
    for part in ("store", "formats"):
        (shim / "shoal" / part).symlink_to((checkout / part).resolve())
    return shim


def _copy_keeping_holes(source: str, target: str) -> None:
    """Copy a file's data extents only, so the copy keeps the source's holes: a restart in place
    finds the never-written part of the last segment as holes, and a plain copy would write it
    out as zeros that recovery then has to read."""
    from shoal.store.mapped_file import data_extents

    size = os.path.getsize(source)
    with open(source, "rb") as reader, open(target, "wb") as writer:
        writer.truncate(size)
        for begin, end in data_extents(reader.fileno(), 0, size):
            at = begin
            while at < end:
                copied = os.copy_file_range(reader.fileno(), writer.fileno(), end - at, at, at)
                if copied == 0:
                    break
                at += copied
    shutil.copystat(source, target)


def _run_trial(filled: Path, work: Path, python_path: Path | None, profile: bool) -> dict[str, Any]:
    copy = work / "trial"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(filled, copy, copy_function=_copy_keeping_holes)
    env = dict(os.environ)
    if python_path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(python_path), env.get("PYTHONPATH", "")])
    command = [sys.executable, __file__, "--recover-only", str(copy)] + (["--profile"] if profile else [])
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    shutil.rmtree(copy, ignore_errors=True)
    return dict(json.loads(out.strip().splitlines()[-1]))


def _print_trial(label: str, result: dict[str, Any]) -> None:
    phases = ", ".join(f"{name} {seconds:.2f}" for name, seconds in result["phases_s"].items() if seconds >= 0.005)
    per_record_us = result["total_s"] / max(result["redispatched"], 1) * 1e6
    decoded = result.get("records_decoded")
    print(
        f"{label:<9} open {result['total_s']:6.2f} s  [{phases}]  re-dispatched {result['redispatched']}"
        + (f", fully decoded {decoded}" if decoded is not None else "")
        + f"  ({per_record_us:.1f} us/record, lossless={result['lossless']})",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000, help="messages to write (default 200,000)")
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: a temp dir under ./build)")
    parser.add_argument("--trials", type=int, default=3, help="recoveries timed per code version (default 3)")
    parser.add_argument("--profile", action="store_true", help="print cProfile's top functions of one recovery")
    parser.add_argument("--baseline", type=Path, default=None, help="a checkout to alternate trials with")
    parser.add_argument(
        "--after-burst",
        action="store_true",
        help="messages without KEYS, killed before any checkpoint (the index is rebuilt, as after a burst)",
    )
    parser.add_argument("--fill-only", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--recover-only", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fill_only is not None:
        fill_and_kill(args.fill_only, args.messages, args.after_burst)
        return
    if args.recover_only is not None:
        print(json.dumps(recover(args.recover_only, args.profile)))
        return
    base = args.dir or Path("build")
    base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-recovery-", dir=base))
    try:
        filled = work / "filled"
        print(f"writing {args.messages} messages of {BODY_BYTES} bytes, then SIGKILL", flush=True)
        code = subprocess.run(
            [sys.executable, __file__, "--fill-only", str(filled), "--messages", str(args.messages)]
            + (["--after-burst"] if args.after_burst else []),
            check=False,
        ).returncode
        if code != -signal.SIGKILL:
            raise SystemExit(f"the filling process ended with {code}, not SIGKILL")
        if not (filled / "abort").exists():
            raise SystemExit("no abort marker after the SIGKILL")
        versions: list[tuple[str, Path | None]] = [("current", None)]
        if args.baseline is not None:
            versions.insert(0, ("baseline", _shim(args.baseline, work)))
        totals: dict[str, list[float]] = {label: [] for label, _ in versions}
        for trial in range(args.trials):
            for label, python_path in versions:
                result = _run_trial(filled, work, python_path, args.profile and trial == 0)
                totals[label].append(result["total_s"])
                _print_trial(label, result)
                if "profile" in result:
                    print(result["profile"], flush=True)
        medians = {label: statistics.median(values) for label, values in totals.items()}
        summary = " ".join(f"{label}={seconds:.2f}s" for label, seconds in medians.items())
        if args.baseline is not None:
            summary += f" ratio={medians['baseline'] / medians['current']:.1f}x"
        print(f"SUMMARY recovery messages={args.messages} median open: {summary}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
