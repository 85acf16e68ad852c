"""Hashing checkpoint files on every core beside their I/O: the per-chunk sha256 of a file as it is
written (:class:`ChunkHasher`), and the check of a stored file against its manifest entry (:func:`check`).

hashlib releases the GIL while it hashes more than 2 KiB, so chunks hash in parallel threads while
another thread writes or reads.
"""

from __future__ import annotations

import hashlib
import io
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any

from .digests import DIGEST_CHUNK_BYTES, WholeFileDigest, Written, segments

HASH_THREADS = max(2, os.cpu_count() or 1)
READ_BYTES = DIGEST_CHUNK_BYTES
"""The most a hashing thread reads at once when checking a file, whatever chunk size a manifest names."""


def _run(pool: ThreadPoolExecutor, work: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    """Start ``work(*args)`` in the pool; the function that waits for it (and raises what it raised).

    During interpreter exit (a save from an ``atexit`` handler) no thread can start: it runs here.
    """
    try:
        return pool.submit(work, *args).result
    except RuntimeError:
        work(*args)
        return lambda: None


class ChunkHasher:
    """The per-chunk sha256 of the bytes that pass through :meth:`hashed`; use as a context manager."""

    def __init__(self, chunk_bytes: int = DIGEST_CHUNK_BYTES) -> None:
        self._chunk_bytes = chunk_bytes
        self._pool = ThreadPoolExecutor(HASH_THREADS, thread_name_prefix="checkpoint-hash")
        self._size = 0
        self._open: dict[int, Any] = {}
        self._done: list[str] = []

    def __enter__(self) -> ChunkHasher:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._pool.shutdown()

    def hashed(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        """``chunks``, each hashed in the pool while the caller writes it out: a save takes the longer of
        the two, not their sum. The next chunk is taken only once the last one is hashed, so a producer
        may reuse its buffer."""
        for chunk in chunks:
            wait = self._start(chunk)
            try:
                yield chunk
            finally:
                wait()

    def written(self) -> Written:
        """The size and chunk digests of everything hashed (once :meth:`hashed` is exhausted)."""
        self._finish(final=True)
        return Written(self._size, self._chunk_bytes, tuple(self._done))

    def _start(self, piece: Any) -> Callable[[], None]:
        view = memoryview(piece).cast("B")
        # A piece's parts go to distinct chunks, and a piece starts once the previous one is hashed: each
        # chunk's digest is fed in order, by one thread at a time.
        waits = []
        for index, start, end in segments(self._size, len(view), self._chunk_bytes):
            digest = self._open.setdefault(index, hashlib.sha256())
            waits.append(_run(self._pool, digest.update, view[start:end]))
        self._size += len(view)

        def wait() -> None:
            for done in waits:
                done()
            self._finish(final=False)

        return wait

    def _finish(self, final: bool) -> None:
        for index in sorted(self._open):
            if final or (index + 1) * self._chunk_bytes <= self._size:
                self._done.append(self._open.pop(index).hexdigest())


def check(stream: IO[bytes], expected: Written | WholeFileDigest) -> str | None:
    """Why the bytes of ``stream`` are not those ``expected`` records, or None if they are.

    Chunks are read and hashed by several threads at once; a file recorded with one whole-file sha256
    (manifests from before per-chunk digests) is hashed in one thread while the next piece is read.
    """
    size = stream.seek(0, os.SEEK_END)
    if size != expected.size:
        return f"has {size} bytes, manifest says {expected.size}"
    if isinstance(expected, WholeFileDigest):
        stream.seek(0)
        actual = _whole_file_sha256(stream)
        return None if actual == expected.sha256 else f"has sha256 {actual}, manifest says {expected.sha256}"
    bad = _first_bad_chunk(_reader_at(stream), expected)
    if bad is None:
        return None
    index, actual = bad
    start, end = expected.chunk_span(index)
    return (
        f"chunk {index} (bytes {start}-{end - 1}) has sha256 {actual}, "
        f"manifest says {expected.chunk_sha256[index]}"
    )


def _first_bad_chunk(read_at: Callable[[int, int], bytes], expected: Written) -> tuple[int, str] | None:
    """A chunk whose sha256 differs from the manifest's, and its actual digest; the threads stop at the
    first they find."""
    indices = iter(range(len(expected.chunk_sha256)))
    taking = threading.Lock()
    bad: dict[int, str] = {}

    def work() -> None:
        while not bad:
            with taking:
                index = next(indices, None)
            if index is None:
                return
            actual = _sha256_of_range(read_at, *expected.chunk_span(index))
            if actual != expected.chunk_sha256[index]:
                bad[index] = actual

    with ThreadPoolExecutor(HASH_THREADS, thread_name_prefix="checkpoint-verify") as pool:
        for done in [_run(pool, work) for _ in range(HASH_THREADS)]:
            done()
    return min(bad.items()) if bad else None


def _sha256_of_range(read_at: Callable[[int, int], bytes], start: int, end: int) -> str:
    digest = hashlib.sha256()
    while start < end and (data := read_at(start, min(READ_BYTES, end - start))):
        digest.update(data)
        start += len(data)
    return digest.hexdigest()


def _reader_at(stream: IO[bytes]) -> Callable[[int, int], bytes]:
    """``read_at(offset, n)``: positioned reads, concurrent where the stream is a file (pread)."""
    try:
        fd = stream.fileno()
    except (OSError, io.UnsupportedOperation):
        lock = threading.Lock()

        def read_at(offset: int, n: int) -> bytes:
            with lock:
                stream.seek(offset)
                return stream.read(n)

        return read_at
    return lambda offset, n: os.pread(fd, n, offset)


def _whole_file_sha256(stream: IO[bytes]) -> str:
    """One sha256 of the whole stream, each piece hashed in a thread while the next is read."""
    digest = hashlib.sha256()
    wait: Callable[[], Any] = lambda: None  # noqa: E731
    with ThreadPoolExecutor(1, thread_name_prefix="checkpoint-hash") as pool:
        while piece := stream.read(READ_BYTES):
            wait()
            wait = _run(pool, digest.update, piece)
        wait()
    return digest.hexdigest()
