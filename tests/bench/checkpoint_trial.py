"""One checkpoint trial in a fresh process, so that its peak memory is its own.

    python -m tests.bench.checkpoint_trial KIND --dir DIR --size-mib N [--cap-mib M] [--s3 URL --bucket B]

Prints one JSON line: ``seconds``, ``baseline_mib`` (resident memory before the trial), ``peak_mib``
(the process's peak resident memory), ``error`` (None, or why it failed). ``--cap-mib`` limits the
process's data memory to its baseline plus M MiB (RLIMIT_DATA), so a trial that holds the checkpoint in
memory fails instead of succeeding on a machine with memory to spare.

Kinds: the floors ``raw-write`` (sequential write + fsync), ``raw-read``, ``s3-upload-file`` and
``s3-download-file`` (boto3's own transfer manager), ``s3-get-object`` (one GET streamed to a file),
and ours: ``save``/``restore`` on the filesystem and
``s3-save``/``s3-restore``, through ``Checkpointer`` (``restore`` is ``resume(load)``, which reads each file
once, as the runtime's docs say to resume; ``restore-checked-first`` is ``restore()``, which checks every
file before the caller reads it).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHUNK = 8 * 1024 * 1024
RAW_FILE = "raw.bin"
DOWNLOADED = "downloaded.bin"
S3_RAW_KEY = "raw/weights.bin"
OURS = ("save", "restore", "restore-checked-first", "s3-save", "s3-restore")
"""The kinds that go through the runtime; the others are floors."""


def chunks(size: int) -> Iterator[bytes]:
    """``size`` bytes of incompressible data, 8 MiB at a time, each chunk distinct."""
    block = bytearray(os.urandom(CHUNK))
    sent = 0
    index = 0
    while sent < size:
        block[:8] = index.to_bytes(8, "little")
        piece = bytes(block[: min(CHUNK, size - sent)])
        sent += len(piece)
        index += 1
        yield piece


def _status_mib(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def drop_cache(paths: list[Path]) -> None:
    """Ask the kernel to forget the files' cached pages, so a read comes from the disk."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def cache_then_drop(paths: list[Path]) -> None:
    """Read the files into the page cache, then drop them from it: every read trial starts from the same
    history, its own files cached a moment ago and now not.

    Without the read, a trial's speed depended on whether the trial before had left its files cached:
    here (a VM) reading 1 GiB into page cache just released took about 0.5 s, into other free memory up
    to 1.5 s. The raw file was always cached (its writer or reader ran just before), a checkpoint only
    when a restore had read it (a save drops what it wrote behind it).
    """
    for path in paths:
        with open(path, "rb") as f:
            while f.read(CHUNK):
                pass
    drop_cache(paths)


def consume(value: Any) -> int:
    """Read a restored file to its end, however the runtime hands it over; the number of bytes."""
    if isinstance(value, bytes | bytearray | memoryview):
        return len(value)
    if isinstance(value, str | os.PathLike):
        with open(value, "rb") as f:
            return consume(f)
    if hasattr(value, "read"):
        total = 0
        while piece := value.read(CHUNK):
            total += len(piece)
        return total
    return sum(len(piece) for piece in value)


def _checkpointer(args: argparse.Namespace) -> Any:
    from together_clusters.components.checkpoint import (
        Checkpointer,
        FilesystemBackend,
        RuntimeConfig,
        S3Backend,
    )

    config = RuntimeConfig(keep=1, resume=True)
    if args.kind.startswith("s3"):
        return Checkpointer(S3Backend(args.bucket, "ckpt", endpoint_url=args.s3), keep=1, config=config)
    return Checkpointer(FilesystemBackend(args.dir / "ckpt"), keep=1, config=config)


def _read_every_file(checkpoint: Any) -> int:
    """As the runtime's docs say to read a large checkpoint: each file as a stream (``files[name]`` would
    read it whole into memory)."""
    return sum(consume(checkpoint.open(name)) for name in checkpoint.files)


def _s3_client(args: argparse.Namespace) -> Any:
    import boto3

    return boto3.client("s3", endpoint_url=args.s3)


def trial(args: argparse.Namespace) -> None:
    size = args.size_mib * 1024 * 1024
    kind = args.kind
    if kind == "raw-write":
        with open(args.dir / RAW_FILE, "wb") as f:
            for piece in chunks(size):
                f.write(piece)
            f.flush()
            os.fsync(f.fileno())
    elif kind == "raw-read":
        with open(args.dir / RAW_FILE, "rb") as f:
            consume(f)
    elif kind in ("save", "s3-save"):
        args.checkpointer.save(1, {"weights.bin": chunks(size)})
    elif kind in ("restore", "s3-restore"):
        resumed = args.checkpointer.resume(_read_every_file)
        if resumed is None or resumed.state != size:
            raise RuntimeError(f"restored {resumed and resumed.state} bytes, saved {size}")
    elif kind == "restore-checked-first":
        with args.checkpointer.restore() as restored:
            total = _read_every_file(restored)
        if total != size:
            raise RuntimeError(f"restored {total} bytes, saved {size}")
    elif kind == "s3-upload-file":
        args.client.upload_file(str(args.dir / RAW_FILE), args.bucket, S3_RAW_KEY)
    elif kind == "s3-download-file":
        args.client.download_file(args.bucket, S3_RAW_KEY, str(args.dir / DOWNLOADED))
    elif kind == "s3-get-object":
        body = args.client.get_object(Bucket=args.bucket, Key=S3_RAW_KEY)["Body"]
        with open(args.dir / DOWNLOADED, "wb") as f:
            for piece in body.iter_chunks(CHUNK):
                f.write(piece)
    else:
        raise ValueError(f"unknown kind {kind}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("kind")
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--size-mib", type=int, required=True)
    parser.add_argument("--cap-mib", type=int, default=None)
    parser.add_argument("--s3", default=None)
    parser.add_argument("--bucket", default=None)
    args = parser.parse_args(argv)
    # Everything a trial needs is imported and built before the baseline is taken.
    if args.kind.startswith("s3"):
        args.client = _s3_client(args)
    if args.kind in OURS:
        args.checkpointer = _checkpointer(args)
    if args.kind in ("restore", "restore-checked-first"):
        cache_then_drop([p for p in (args.dir / "ckpt").rglob("*") if p.is_file()])
    if args.kind in ("raw-read", "s3-upload-file"):
        cache_then_drop([args.dir / RAW_FILE])
    baseline = _status_mib("VmRSS")
    if args.cap_mib is not None:
        limit = int((_status_mib("VmData") + args.cap_mib) * 1024 * 1024)
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    error = None
    started = time.perf_counter()
    try:
        trial(args)
    except Exception as exc:  # MemoryError under the cap, or whatever boto3 wraps it in
        error = f"{type(exc).__name__}: {exc}"[:300]
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "baseline_mib": baseline, "peak_mib": peak, "error": error}))


if __name__ == "__main__":
    main()
