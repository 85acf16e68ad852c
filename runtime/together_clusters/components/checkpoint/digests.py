"""What a manifest records of each file: its size and the BLAKE3 digest of each fixed-size chunk of it.

Per-chunk digests let a file be hashed on every core at once, while it is written or read, where one
digest of the whole file runs on one core. BLAKE3 rather than sha256: both are cryptographic hashes,
and BLAKE3 takes a third of the CPU (5.5 GiB/s a core against 1.7 for OpenSSL's sha256 with the CPU's
SHA extensions, on the benchmark machine), which on 2 cores is what a save or a restore waits for.
Manifests written before per-chunk digests record one ``sha256`` of the whole file; those still verify
(:class:`WholeFileDigest`). Pure: no I/O, no threads.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

DIGEST_CHUNK_BYTES = 4 * 1024 * 1024
"""Bytes per digest: small enough that an 8 MiB write or read splits across two cores, large enough that
the manifest lists 256 digests (16 KiB) per GiB."""


@dataclass(frozen=True)
class Written:
    """What a backend wrote: the file's size and the BLAKE3 digest of each ``chunk_bytes`` of it, in order."""

    size: int
    chunk_bytes: int
    chunk_blake3: tuple[str, ...]

    def manifest_entry(self) -> dict[str, Any]:
        return {"size": self.size, "chunk_bytes": self.chunk_bytes, "chunk_blake3": list(self.chunk_blake3)}

    def chunk_span(self, index: int) -> tuple[int, int]:
        """The byte range ``[start, end)`` of chunk ``index``."""
        start = index * self.chunk_bytes
        return start, min(start + self.chunk_bytes, self.size)


@dataclass(frozen=True)
class WholeFileDigest:
    """A manifest entry from before per-chunk digests: one sha256 of the whole file."""

    size: int
    sha256: str


def expected_digest(entry: Mapping[str, Any]) -> Written | WholeFileDigest:
    """The digest a manifest entry records; ValueError saying what is wrong if it is malformed."""
    size = entry.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ValueError(f"size {size!r} is not a byte count")
    if "chunk_blake3" not in entry:
        if not isinstance(entry.get("sha256"), str):
            raise ValueError("neither chunk_blake3 nor sha256 is recorded")
        return WholeFileDigest(size, entry["sha256"])
    chunk_bytes, digests = entry.get("chunk_bytes"), entry["chunk_blake3"]
    if not isinstance(chunk_bytes, int) or isinstance(chunk_bytes, bool) or chunk_bytes < 1:
        raise ValueError(f"chunk_bytes {chunk_bytes!r} is not a positive byte count")
    if not isinstance(digests, list) or not all(isinstance(d, str) for d in digests):
        raise ValueError("chunk_blake3 is not a list of hex digests")
    if len(digests) != chunk_count(size, chunk_bytes):
        raise ValueError(
            f"{len(digests)} chunk digests for {size} bytes in chunks of {chunk_bytes} "
            f"(expected {chunk_count(size, chunk_bytes)})"
        )
    return Written(size, chunk_bytes, tuple(digests))


def chunk_count(size: int, chunk_bytes: int) -> int:
    return -(-size // chunk_bytes)


def segments(position: int, length: int, chunk_bytes: int) -> Iterator[tuple[int, int, int]]:
    """How ``length`` bytes written at file offset ``position`` fall into chunks: ``(chunk index, start,
    end)`` with start and end relative to those bytes, one per chunk they touch, in order."""
    start = 0
    while start < length:
        index, offset = divmod(position + start, chunk_bytes)
        end = min(length, start + chunk_bytes - offset)
        yield index, start, end
        start = end
