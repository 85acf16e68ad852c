"""A stored file read through its manifest entry, checked as it is read: one pass over the bytes, where a
check before the read takes two.

Each chunk is read and hashed ahead of the reader, on every core, and handed over only once its BLAKE3
digest matches the manifest; the first that does not raises :class:`CorruptCheckpoint` and is kept as the
file's :attr:`VerifyingReader.damage`, so whoever reads through a loader that swallows or rewraps errors
can still tell the bytes were bad. The readers of one checkpoint share a :class:`ReadAhead`: its threads,
and a bound on the chunks they hold however many files a loader reads in turn.
"""

from __future__ import annotations

import io
import os
import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO, Any

from blake3 import blake3

from .digests import Written
from .errors import CorruptCheckpoint
from .hashing import HASH_THREADS, chunk_problem

READ_AHEAD_CHUNKS = 2 * HASH_THREADS
"""Chunks read and hashed ahead of the reader: every core busy, and memory bounded by this many chunks."""

HOLDING_READERS = 2
"""Readers of one checkpoint that keep their current chunk: a loader alternating between two files does
not read a chunk again for each small read, and one reading many files in turn holds two chunks, not one
per file. Only the most recent reader reads ahead."""


class ReadAhead:
    """What the verifying readers of one checkpoint share: the threads that read and hash ahead of them,
    and which of them may hold chunks. Close it once its readers are closed."""

    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(HASH_THREADS, thread_name_prefix="checkpoint-verify")
        self._recent: OrderedDict[int, VerifyingReader] = OrderedDict()
        self._lock = threading.Lock()

    def reading(self, reader: VerifyingReader) -> None:
        """``reader`` is about to read a chunk: the one before it stops reading ahead, older ones drop
        their chunks (unless they are reading right now, in another thread)."""
        with self._lock:
            self._recent[id(reader)] = reader
            self._recent.move_to_end(id(reader))
            others = list(self._recent.values())[:-1]
            for old in others[: -HOLDING_READERS + 1 or None]:
                del self._recent[id(old)]
        for position, other in enumerate(reversed(others)):
            other.release(keep_current=position < HOLDING_READERS - 1)

    def close(self) -> None:
        self.pool.shutdown(cancel_futures=True)


class VerifyingReader(io.BufferedIOBase):
    """File ``label`` of a checkpoint from ``stream`` (positioned anywhere), whose bytes must be those
    ``expected`` records; seekable, and every byte it returns belongs to a chunk whose digest matched."""

    def __init__(self, stream: IO[bytes], expected: Written, label: str, shared: ReadAhead) -> None:
        super().__init__()
        self._stream = stream
        self._expected = expected
        self._label = label
        self._chunks = len(expected.chunk_blake3)
        self._position = 0
        self._current: tuple[int, bytes] = (-1, b"")
        self._ahead: deque[tuple[int, Future[tuple[bytes, str]]]] = deque()
        self._shared = shared
        self._in_use = threading.Lock()
        self._read_at = _positional_reader(stream)
        self.damage: str | None = None
        """What was wrong with the first chunk that did not match, once one was read; else None."""

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._position, os.SEEK_END: self._expected.size}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self._position = base + offset
        return self._position

    def read(self, size: int | None = -1) -> bytes:
        with self._in_use:
            return self._read(size)

    def release(self, keep_current: bool) -> None:
        """Stop reading ahead and, unless ``keep_current``, drop the chunk held for the next small read;
        nothing if a read is under way in another thread."""
        if not self._in_use.acquire(blocking=False):
            return
        try:
            self._drop_ahead()
            if not keep_current:
                self._current = (-1, b"")
        finally:
            self._in_use.release()

    def _read(self, size: int | None) -> bytes:
        wanted = self._expected.size - self._position if size is None or size < 0 else size
        pieces = []
        while wanted > 0 and self._position < self._expected.size:
            index, offset = divmod(self._position, self._expected.chunk_bytes)
            chunk = self._chunk(index)
            piece = chunk[offset : offset + wanted] if offset or wanted < len(chunk) else chunk
            pieces.append(piece)
            self._position += len(piece)
            wanted -= len(piece)
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def read1(self, size: int = -1) -> bytes:
        return self.read(size)

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            with self._in_use:
                self._drop_ahead()
                self._current = (-1, b"")
                self._stream.close()
        super().close()

    def _drop_ahead(self) -> None:
        while self._ahead:
            self._ahead.popleft()[1].cancel()

    def _chunk(self, index: int) -> bytes:
        if self._current[0] == index:
            return self._current[1]
        if self.damage is not None:
            raise CorruptCheckpoint(self.damage)
        self._shared.reading(self)
        while self._ahead and self._ahead[0][0] != index:  # a seek: what was read ahead is not needed
            self._ahead.popleft()[1].cancel()
        if not self._ahead:
            self._ahead.append((index, self._shared.pool.submit(self._fetch, index)))
        self._read_ahead_from(index)
        data, digest = self._ahead.popleft()[1].result()
        problem = chunk_problem(self._expected, index, len(data), digest)
        if problem is not None:
            self.damage = f"file {self._label!r} {problem}"
            raise CorruptCheckpoint(self.damage)
        self._current = (index, data)
        return data

    def _read_ahead_from(self, index: int) -> None:
        following = self._ahead[-1][0] + 1 if self._ahead else index + 1
        while following < min(index + 1 + READ_AHEAD_CHUNKS, self._chunks):
            self._ahead.append((following, self._shared.pool.submit(self._fetch, following)))
            following += 1

    def _fetch(self, index: int) -> tuple[bytes, str]:
        start, end = self._expected.chunk_span(index)
        data = self._read_at(start, end - start)
        return data, blake3(data).hexdigest()


def _positional_reader(stream: IO[bytes]) -> Callable[[int, int], bytes]:
    """``read(offset, size)`` of ``stream``: os.pread where it is a file, so chunks are read in parallel
    without a shared file position; otherwise seek and read, one thread at a time. Short only at its end."""
    try:
        fd = stream.fileno()
    except (OSError, io.UnsupportedOperation):
        lock = threading.Lock()

        def seek_and_read(offset: int, size: int) -> bytes:
            with lock:
                stream.seek(offset)
                return stream.read(size)

        return seek_and_read
    if hasattr(os, "posix_fadvise"):  # not on macOS
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)

    def pread_fully(offset: int, size: int) -> bytes:
        data = os.pread(fd, size, offset)
        while 0 < len(data) < size:
            more = os.pread(fd, size - len(data), offset + len(data))
            if not more:
                break
            data += more
        return data

    return pread_fully
