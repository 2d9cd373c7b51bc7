"""Does pre-zeroing a segment make the CommitLog's `fdatasync` cheaper? (issue 18)

    .venv/bin/python bench/flush_prep.py [--dir PATH] [--syncs N] [--rounds R]

Writes 1,100-byte records through a shared mapping (as `shoal.store.mapped_file` does) with one
`fdatasync` after each, into a 64 MiB file prepared two ways, alternating per round:
  fallocated  posix_fallocate only (the store's default: unwritten extents)
  zeroed      posix_fallocate, zeros written over the whole file, synced (real blocks)
and prints p50 / p99 per round. On this project's VM the zeroed file was slower, not faster
(docs/performance.md, issue 18 section), so the store keeps fallocated segments for SYNC_FLUSH.
"""

from __future__ import annotations

import argparse
import mmap
import os
import tempfile
import time

SEGMENT_BYTES = 64 << 20
RECORD_BYTES = 1100
ZERO_CHUNK = bytes(1 << 20)


def prepare(path: str, zeroed: bool) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.posix_fallocate(fd, 0, SEGMENT_BYTES)
    if zeroed:
        for at in range(0, SEGMENT_BYTES, len(ZERO_CHUNK)):
            os.pwrite(fd, ZERO_CHUNK, at)
    os.fdatasync(fd)
    return fd


def measure(directory: str, zeroed: bool, syncs: int) -> tuple[float, float]:
    """(p50, p99) in microseconds of one record store + fdatasync."""
    path = os.path.join(directory, "segment-zeroed" if zeroed else "segment-fallocated")
    fd = prepare(path, zeroed)
    mapping = mmap.mmap(fd, SEGMENT_BYTES, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE)
    view = memoryview(mapping)
    record = os.urandom(RECORD_BYTES)
    samples = []
    try:
        for index in range(syncs):
            position = index * RECORD_BYTES
            began = time.perf_counter_ns()
            view[position : position + RECORD_BYTES] = record
            os.fdatasync(fd)
            samples.append((time.perf_counter_ns() - began) / 1000)
    finally:
        view.release()
        mapping.close()
        os.close(fd)
        os.unlink(path)
    samples.sort()
    return samples[len(samples) // 2], samples[int(len(samples) * 0.99)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", default=None, help="a directory on the disk to test (default: a temp dir)")
    parser.add_argument("--syncs", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="shoal-flush-prep-", dir=args.dir) as directory:
        for round_index in range(args.rounds):
            for zeroed in (False, True):
                p50, p99 = measure(directory, zeroed, args.syncs)
                name = "zeroed" if zeroed else "fallocated"
                print(f"round {round_index} {name:<10} p50 {p50:.0f} us  p99 {p99:.0f} us")


if __name__ == "__main__":
    main()
