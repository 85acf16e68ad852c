"""Per-chunk digests in the manifest: recorded for every chunk, checked before a checkpoint is handed
over, a damaged chunk reported with its file and both digests, and manifests from before (one whole-file
sha256) still restore. The oracles are the blake3 package and hashlib over slices of the bytes saved."""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from blake3 import blake3

from together_clusters.components.checkpoint import Checkpointer, CorruptCheckpoint, FilesystemBackend
from together_clusters.components.checkpoint.checkpointer import MANIFEST

MIB = 1 << 20


def irregular_pieces(data: bytes, piece: int) -> Iterator[bytes]:
    """``data`` in pieces of ``piece`` bytes, which never line up with the manifest's chunks."""
    for start in range(0, len(data), piece):
        yield data[start : start + piece]


def blake3_of_slices(data: bytes, chunk_bytes: int) -> list[str]:
    return [blake3(data[i : i + chunk_bytes]).hexdigest() for i in range(0, len(data), chunk_bytes)]


def recorded(root: Path, name: str, file_name: str) -> dict[str, Any]:
    entry: dict[str, Any] = json.loads((root / name / MANIFEST).read_text())["files"][file_name]
    return entry


def test_the_manifest_records_the_digest_of_every_chunk(tmp_path: Path) -> None:
    data = os.urandom(9 * MIB + 5)
    ckpt = Checkpointer(FilesystemBackend(tmp_path))
    name = ckpt.save(1, {"weights.bin": irregular_pieces(data, MIB + 7)})
    entry = recorded(tmp_path, name, "weights.bin")
    assert entry["size"] == len(data)
    assert len(entry["chunk_blake3"]) >= 3, "a 9 MiB file should span several chunks"
    assert entry["chunk_blake3"] == blake3_of_slices(data, entry["chunk_bytes"])


@pytest.mark.parametrize("size_mib_offset", [(0, 0), (0, 1), (4, -1), (4, 0), (4, 1), (8, 0), (8, 3)])
def test_files_of_any_size_round_trip_with_digests_of_their_chunks(
    tmp_path: Path, size_mib_offset: tuple[int, int]
) -> None:
    size = size_mib_offset[0] * MIB + size_mib_offset[1]
    data = os.urandom(size)
    ckpt = Checkpointer(FilesystemBackend(tmp_path))
    name = ckpt.save(1, {"f": irregular_pieces(data, 3 * MIB + 1) if data else [b""]})
    entry = recorded(tmp_path, name, "f")
    assert entry["chunk_blake3"] == blake3_of_slices(data, entry["chunk_bytes"])
    restored = ckpt.latest()
    assert restored is not None
    with restored:
        assert restored.open("f").read() == data


def test_a_damaged_chunk_is_reported_with_its_file_and_both_digests(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ckpt = Checkpointer(FilesystemBackend(tmp_path), keep=5)
    ckpt.save(1, {"weights.bin": b"older"})
    data = os.urandom(10 * MIB)
    name = ckpt.save(2, {"weights.bin": irregular_pieces(data, 2 * MIB)})
    entry = recorded(tmp_path, name, "weights.bin")
    chunk_bytes = entry["chunk_bytes"]
    damaged = bytearray(data)
    damaged[chunk_bytes + 12345] ^= 0x01
    (tmp_path / name / "weights.bin").write_bytes(damaged)

    with pytest.raises(CorruptCheckpoint) as raised:
        ckpt.load(name)
    message = str(raised.value)
    assert "'weights.bin'" in message
    assert entry["chunk_blake3"][1] in message
    assert blake3(damaged[chunk_bytes : 2 * chunk_bytes]).hexdigest() in message
    assert entry["chunk_blake3"][0] not in message, "an intact chunk reported as damaged"
    restored = ckpt.latest()
    assert restored is not None and restored.step == 1


@pytest.mark.parametrize("change", ["truncated", "extended"])
def test_a_file_of_another_size_is_reported_with_both_sizes(tmp_path: Path, change: str) -> None:
    ckpt = Checkpointer(FilesystemBackend(tmp_path))
    data = os.urandom(5 * MIB)
    name = ckpt.save(1, {"weights.bin": [data]})
    changed = data[:-1] if change == "truncated" else data + b"\0"
    (tmp_path / name / "weights.bin").write_bytes(changed)
    with pytest.raises(
        CorruptCheckpoint, match=f"'weights.bin' has {len(changed)} bytes, manifest says {len(data)}"
    ):
        ckpt.load(name)


def write_old_checkpoint(root: Path, name: str, step: int, files: dict[str, bytes]) -> None:
    """A checkpoint as the runtime wrote it before per-chunk digests: one sha256 per file, format 1."""
    (root / name).mkdir(parents=True)
    for file_name, data in files.items():
        (root / name / file_name).write_bytes(data)
    manifest = {
        "format": 1,
        "step": step,
        "files": {n: {"size": len(d), "sha256": hashlib.sha256(d).hexdigest()} for n, d in files.items()},
        "metadata": {"epoch": 3},
    }
    (root / name / MANIFEST).write_text(json.dumps(manifest, sort_keys=True))


def test_a_checkpoint_with_an_old_manifest_still_restores_and_verifies(tmp_path: Path) -> None:
    weights = os.urandom(9 * MIB + 1)
    old = "ckpt-000000000004-00000000000000000001"
    write_old_checkpoint(tmp_path, old, 4, {"weights.bin": weights, "state.json": b"{}"})
    ckpt = Checkpointer(FilesystemBackend(tmp_path))
    restored = ckpt.latest()
    assert restored is not None and restored.name == old and restored.step == 4
    with restored:
        assert restored.open("weights.bin").read() == weights
        assert restored.metadata == {"epoch": 3}

    damaged = bytearray(weights)
    damaged[-1] ^= 0x80
    (tmp_path / old / "weights.bin").write_bytes(damaged)
    with pytest.raises(CorruptCheckpoint) as raised:
        ckpt.load(old)
    message = str(raised.value)
    assert "'weights.bin'" in message
    assert hashlib.sha256(weights).hexdigest() in message
    assert hashlib.sha256(damaged).hexdigest() in message
    assert ckpt.latest() is None


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ({"size": 3, "chunk_bytes": 4, "chunk_blake3": []}, "0 chunk digests for 3 bytes"),
        ({"size": 3, "chunk_bytes": 0, "chunk_blake3": ["x"]}, "chunk_bytes 0"),
        ({"size": 3, "chunk_bytes": 4, "chunk_blake3": "x"}, "not a list"),
        ({"size": -1, "sha256": "x"}, "size -1"),
        ({"size": 3}, "neither chunk_blake3 nor sha256"),
    ],
)
def test_a_malformed_file_entry_is_corrupt_not_a_crash(
    tmp_path: Path, entry: dict[str, Any], reason: str
) -> None:
    ckpt = Checkpointer(FilesystemBackend(tmp_path))
    name = ckpt.save(1, {"s": b"abc"})
    manifest = json.loads((tmp_path / name / MANIFEST).read_text())
    manifest["files"]["s"] = entry
    (tmp_path / name / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(CorruptCheckpoint, match=reason):
        ckpt.load(name)


class InMemoryReads(FilesystemBackend):
    """The filesystem backend, except that files are read back as in-memory streams (no file descriptor,
    as a backend that is not a local file may hand over)."""

    def open(self, entry: str, name: str) -> IO[bytes]:
        with super().open(entry, name) as f:
            return io.BytesIO(f.read())


def test_streams_without_a_file_descriptor_are_checked_chunk_by_chunk(tmp_path: Path) -> None:
    data = os.urandom(9 * MIB)
    ckpt = Checkpointer(InMemoryReads(tmp_path), keep=5)
    name = ckpt.save(1, {"f": [data]})
    restored = ckpt.load(name)
    assert restored is not None
    with restored:
        assert restored.open("f").read() == data
    entry = recorded(tmp_path, name, "f")
    damaged = bytearray(data)
    damaged[-3] ^= 0x10
    (tmp_path / name / "f").write_bytes(damaged)
    last = len(entry["chunk_blake3"]) - 1
    with pytest.raises(
        CorruptCheckpoint, match=f"'f' chunk {last} .* manifest says {entry['chunk_blake3'][last]}"
    ):
        ckpt.load(name)
