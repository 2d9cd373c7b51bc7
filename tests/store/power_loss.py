"""A power-loss simulator at the store's durability seam (`shoal.store.durability`).

`DiskRecorder` replaces the seam's functions while a workload runs. At every call it first takes
the volatile content of every file under the store root (what the page cache holds: the mapped
segments, the checkpoint, the JSON files), then models what the call makes durable:

* `fdatasync`/`fsync` of a file: its content at the call becomes its durable content;
* `fsync_directory`: the directory's entries as they are now become durable;
* `create_file`, `replace`, `unlink`, `mkdir`, `rmdir`: a pending entry change in that directory,
  durable only once the directory is synced (a rename is one atomic change).

`CrashPoint` freezes that model at one moment. `materialise` writes one file tree a power cut at
that moment could leave, chosen by a seeded RNG:

* each directory keeps a prefix of its pending entry changes (none, all, or any in between);
* each file keeps its last synced content, and every 4 KiB page written since may hold any version
  seen since the sync (pages persisted in any order); in `torn` images a page may also mix two
  versions at 512-byte sector granularity; the file length is one of the versions' lengths.

Files are identified by our own inode numbers, so renames and deleted-but-revived files keep their
content history. The recorder also checks that the tree on disk matches its model at each call,
so an entry change that bypasses the seam is reported (`unmodelled`).
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shoal.store import durability

PAGE_BYTES = 4096
SECTOR_BYTES = 512
ROOT_INODE = 0


@dataclass
class _Inode:
    number: int
    is_dir: bool
    durable: bytes = b""
    """Content at the last sync (b'' for a file never synced: its length may be 0 on disk)."""
    versions: list[bytes] = field(default_factory=list)
    """Distinct contents seen since the last sync, oldest first."""
    entries: dict[str, int] = field(default_factory=dict)
    """Directories: name -> inode, as the page cache sees them."""
    durable_entries: dict[str, int] = field(default_factory=dict)
    pending: list[tuple[Any, ...]] = field(default_factory=list)
    """Directories: ('link', name, inode) / ('unlink', name) / ('rename', src, dst, inode) since the last sync."""

    @property
    def current(self) -> bytes:
        return self.versions[-1] if self.versions else self.durable


@dataclass(frozen=True)
class CrashPoint:
    """The durable model at one moment; `facts` is what the workload knew then (acks etc.)."""

    index: int
    label: str
    files: dict[int, tuple[bytes, tuple[bytes, ...]]]
    dirs: dict[int, tuple[tuple[tuple[str, int], ...], tuple[tuple[Any, ...], ...]]]
    facts: dict[str, Any]


class DiskRecorder:
    """Records durability calls under `root` and freezes crash points (thread-safe)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        assert not any(root.iterdir()), "record from an empty, existing store root"
        self.inodes: dict[int, _Inode] = {ROOT_INODE: _Inode(ROOT_INODE, True)}
        self._next_inode = 1
        self._lock = threading.RLock()
        self.crash_points: list[CrashPoint] = []
        self.facts: dict[str, Any] = {}
        """Set by the workload; copied (shallowly) into each crash point."""
        self.unmodelled: list[str] = []
        self.events = 0
        self.capture_on_events = True

    # --- namespace ---
    def _relative(self, path: str | os.PathLike[str]) -> tuple[str, ...] | None:
        absolute = os.path.abspath(os.fspath(path))
        root = os.fspath(self.root)
        if absolute == root:
            return ()
        if not absolute.startswith(root + os.sep):
            return None
        return tuple(absolute[len(root) + 1 :].split(os.sep))

    def _lookup(self, parts: tuple[str, ...]) -> int | None:
        inode = ROOT_INODE
        for name in parts:
            found = self.inodes[inode].entries.get(name)
            if found is None:
                return None
            inode = found
        return inode

    def _new_inode(self, is_dir: bool) -> _Inode:
        inode = _Inode(self._next_inode, is_dir)
        self._next_inode += 1
        self.inodes[inode.number] = inode
        return inode

    def _live_files(self) -> Iterator[tuple[Path, _Inode]]:
        stack: list[tuple[Path, int]] = [(self.root, ROOT_INODE)]
        while stack:
            path, number = stack.pop()
            for name, child in self.inodes[number].entries.items():
                inode = self.inodes[child]
                if inode.is_dir:
                    stack.append((path / name, child))
                else:
                    yield path / name, inode

    # --- volatile content ---
    def _snapshot(self) -> None:
        """Record the page-cache content of every live file (a new version when it changed)."""
        for path, inode in self._live_files():
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                self.unmodelled.append(f"{path} is in the model but not on disk")
                continue
            if data != inode.current:
                inode.versions.append(data)

    def _check_namespace(self) -> None:
        modelled = {str(path) for path, _ in self._live_files()}
        for directory, _dirs, names in os.walk(self.root):
            for name in names:
                path = os.path.join(directory, name)
                if path not in modelled:
                    self.unmodelled.append(f"{path} exists but was not created through the seam")
                    return

    def _event(self, label: str) -> None:
        self.events += 1
        self._snapshot()
        if self.capture_on_events:
            self._capture(f"before {label}")

    def crash_point(self, label: str) -> None:
        """Freeze a crash point now (a moment between durability calls)."""
        with self._lock:
            self._snapshot()
            self._capture(label)

    def _capture(self, label: str) -> None:
        files: dict[int, tuple[bytes, tuple[bytes, ...]]] = {}
        dirs: dict[int, tuple[tuple[tuple[str, int], ...], tuple[tuple[Any, ...], ...]]] = {}
        for number, inode in self.inodes.items():
            if inode.is_dir:
                dirs[number] = (tuple(inode.durable_entries.items()), tuple(inode.pending))
            else:
                files[number] = (inode.durable, tuple(inode.versions))
        self.crash_points.append(CrashPoint(len(self.crash_points), label, files, dirs, dict(self.facts)))

    # --- the seam ---
    @contextmanager
    def installed(self) -> Iterator[DiskRecorder]:
        """Replace `shoal.store.durability`'s functions with recording ones for the block."""
        originals = {name: getattr(durability, name) for name in _SEAM}
        wrappers: dict[str, Callable[..., Any]] = {
            "fdatasync": self._wrap_sync(originals["fdatasync"], "fdatasync"),
            "fsync": self._wrap_sync(originals["fsync"], "fsync"),
            "fsync_directory": self._wrap_path(originals["fsync_directory"], "fsync_directory"),
            "create_file": self._wrap_path(originals["create_file"], "create_file"),
            "replace": self._wrap_replace(originals["replace"]),
            "unlink": self._wrap_path(originals["unlink"], "unlink"),
            "mkdir": self._wrap_path(originals["mkdir"], "mkdir"),
            "rmdir": self._wrap_path(originals["rmdir"], "rmdir"),
        }
        for name, wrapper in wrappers.items():
            setattr(durability, name, wrapper)
        try:
            yield self
        finally:
            for name, original in originals.items():
                setattr(durability, name, original)

    def _wrap_sync(self, original: Callable[[int], None], kind: str) -> Callable[[int], None]:
        def sync(fd: int) -> None:
            target = os.readlink(f"/proc/self/fd/{fd}")
            parts = self._relative(target)
            if parts is None:
                return original(fd)
            with self._lock:
                self._event(f"{kind} {'/'.join(parts)}")
                original(fd)
                number = self._lookup(parts)
                if number is not None:
                    inode = self.inodes[number]
                    if inode.is_dir:
                        inode.durable_entries = dict(inode.entries)
                        inode.pending = []
                    else:
                        inode.durable = inode.current
                        inode.versions = []
            return None

        return sync

    def _wrap_replace(self, original: Callable[..., None]) -> Callable[..., None]:
        def replace(source: Any, target: Any) -> None:
            source_parts, target_parts = self._relative(source), self._relative(target)
            if source_parts is None and target_parts is None:
                return original(source, target)
            assert source_parts is not None and target_parts is not None
            assert source_parts[:-1] == target_parts[:-1], "the model handles renames within one directory"
            with self._lock:
                self._event(f"replace {'/'.join(source_parts)} -> {target_parts[-1]}")
                original(source, target)
                parent = self._lookup(source_parts[:-1])
                assert parent is not None
                directory = self.inodes[parent]
                moved = directory.entries.pop(source_parts[-1])
                directory.entries[target_parts[-1]] = moved
                directory.pending.append(("rename", source_parts[-1], target_parts[-1], moved))
                self._check_namespace()
            return None

        return replace

    def _wrap_path(self, original: Callable[..., Any], kind: str) -> Callable[..., Any]:
        def call(path: Any, *args: Any, **kwargs: Any) -> Any:
            parts = self._relative(path)
            if parts is None:
                return original(path, *args, **kwargs)
            with self._lock:
                self._event(f"{kind} {'/'.join(parts)}")
                result = original(path, *args, **kwargs)
                self._apply(kind, parts)
                self._check_namespace()
            return result

        return call

    def _apply(self, kind: str, parts: tuple[str, ...]) -> None:
        number = self._lookup(parts)
        if kind == "fsync_directory":
            assert number is not None
            directory = self.inodes[number]
            directory.durable_entries = dict(directory.entries)
            directory.pending = []
            return
        parent_number = self._lookup(parts[:-1])
        assert parent_number is not None, parts
        parent = self.inodes[parent_number]
        name = parts[-1]
        if kind in ("create_file", "mkdir"):
            if number is not None:
                return  # opened an existing file (O_TRUNC shows up as a new version)
            inode = self._new_inode(kind == "mkdir")
            parent.entries[name] = inode.number
            parent.pending.append(("link", name, inode.number))
        elif kind in ("unlink", "rmdir"):
            if number is None:
                return
            del parent.entries[name]
            parent.pending.append(("unlink", name))

    # --- crash images ---
    def materialise(self, point: CrashPoint, target: Path, rng: random.Random, mode: str) -> None:
        """Write one file tree the power cut at `point` could leave under `target`.

        mode: 'synced' (nothing unsynced survives), 'latest' (everything written survived),
        'random' (per-directory prefixes, per-page versions) or 'torn' (random, plus pages
        mixed at sector granularity)."""
        target.mkdir(parents=True, exist_ok=True)
        self._materialise_dir(point, ROOT_INODE, target, rng, mode)

    def _materialise_dir(self, point: CrashPoint, number: int, path: Path, rng: random.Random, mode: str) -> None:
        durable_entries, pending = point.dirs[number]
        entries = dict(durable_entries)
        if mode == "synced":
            kept = 0
        elif mode == "latest":
            kept = len(pending)
        else:
            kept = rng.randint(0, len(pending))
        for change in pending[:kept]:
            if change[0] == "link":
                entries[change[1]] = change[2]
            elif change[0] == "unlink":
                entries.pop(change[1], None)
            else:
                entries.pop(change[1], None)
                entries[change[2]] = change[3]
        for name, child in sorted(entries.items()):
            if child in point.dirs:
                (path / name).mkdir()
                self._materialise_dir(point, child, path / name, rng, mode)
            else:
                durable, versions = point.files[child]
                (path / name).write_bytes(_file_image(durable, versions, rng, mode))


def _file_image(durable: bytes, versions: tuple[bytes, ...], rng: random.Random, mode: str) -> bytes:
    if not versions or mode == "synced":
        return durable
    if mode == "latest":
        return versions[-1]
    candidates = (durable, *versions)
    length = rng.choice(candidates).__len__()
    out = bytearray(length)
    for start in range(0, length, PAGE_BYTES):
        end = min(start + PAGE_BYTES, length)
        pages = {candidate[start:end] for candidate in candidates}
        if len(pages) == 1:
            page = next(iter(pages))
        else:
            options = sorted(pages)
            page = rng.choice(options)
            if mode == "torn" and rng.random() < 0.5:
                other = rng.choice(options)
                mixed = bytearray(page.ljust(end - start, b"\0"))
                padded = other.ljust(end - start, b"\0")
                for sector in range(0, end - start, SECTOR_BYTES):
                    if rng.random() < 0.5:
                        mixed[sector : sector + SECTOR_BYTES] = padded[sector : sector + SECTOR_BYTES]
                page = bytes(mixed)
        out[start : start + len(page)] = page[: end - start]
    return bytes(out)


_SEAM = ("fdatasync", "fsync", "fsync_directory", "create_file", "replace", "unlink", "mkdir", "rmdir")
