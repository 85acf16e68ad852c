"""``Checkpointer.resume(load)``: a restore that reads each file once. The loader gets streams that hand
over a chunk only once its digest matches the manifest; a damaged chunk found while it loads makes the
loader's result void and the run resume from the next older checkpoint, however the loader reacted to
the damage. The oracles are the bytes saved, a byte flipped on disk, and the runtime's stderr line."""

from __future__ import annotations

import json
import os
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from together_clusters.components.checkpoint import (
    Checkpoint,
    Checkpointer,
    CorruptCheckpoint,
    FilesystemBackend,
    RuntimeConfig,
)
from together_clusters.components.checkpoint.checkpointer import MANIFEST

MIB = 1 << 20


def resuming(root: Path, keep: int = 5) -> Checkpointer:
    return Checkpointer(FilesystemBackend(root), keep=keep, config=RuntimeConfig(keep=keep, resume=True))


def chunk_bytes_of(root: Path, name: str, file_name: str) -> int:
    entry = json.loads((root / name / MANIFEST).read_text())["files"][file_name]
    return int(entry["chunk_bytes"])


def flip(path: Path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ 0x01]))


def read_in_pieces(stream: IO[bytes], piece: int) -> Iterator[bytes]:
    while data := stream.read(piece):
        yield data


def test_the_loader_gets_the_newest_checkpoint_and_its_result_is_returned(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    ckpt = resuming(tmp_path)
    ckpt.save(1, {"weights.bin": b"older"})
    data = os.urandom(9 * MIB + 3)
    name = ckpt.save(2, {"weights.bin": [data[: 5 * MIB], data[5 * MIB :]], "opt.bin": b"adam"}, {"lr": 0.1})

    resumed = ckpt.resume(lambda c: (c.open("weights.bin").read(), c.files["opt.bin"]))

    assert resumed is not None
    assert (resumed.name, resumed.step, dict(resumed.metadata)) == (name, 2, {"lr": 0.1})
    assert resumed.state == (data, b"adam")
    assert f"resumed step=2 checkpoint={name}" in capfd.readouterr().err


def test_nothing_is_loaded_unless_the_environment_asks_to_resume(tmp_path: Path) -> None:
    Checkpointer(FilesystemBackend(tmp_path)).save(1, {"f": b"x"})
    calls: list[Checkpoint] = []
    assert Checkpointer(FilesystemBackend(tmp_path)).resume(calls.append) is None
    assert calls == []
    assert resuming(tmp_path / "empty").resume(calls.append) is None
    assert calls == []


def test_a_damaged_chunk_is_never_handed_over_and_the_older_checkpoint_is_loaded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ckpt = resuming(tmp_path)
    older = os.urandom(3 * MIB)
    ckpt.save(1, {"weights.bin": older})
    newer = os.urandom(13 * MIB)
    name = ckpt.save(2, {"weights.bin": newer})
    chunk = chunk_bytes_of(tmp_path, name, "weights.bin")
    flip(tmp_path / name / "weights.bin", 2 * chunk + 100)

    handed_over: dict[int, bytes] = {}

    def load(checkpoint: Checkpoint) -> bytes:
        received = b"".join(read_in_pieces(checkpoint.open("weights.bin"), MIB - 1))
        handed_over[checkpoint.step] = received
        return received

    resumed = ckpt.resume(load)

    assert resumed is not None and resumed.step == 1 and resumed.state == older
    assert 2 not in handed_over, "the loader finished reading a damaged file"
    assert any(name in r.getMessage() and "chunk 2" in r.getMessage() for r in caplog.records)


def test_bytes_before_the_damage_are_the_saved_ones_and_nothing_of_the_damaged_chunk_is_seen(
    tmp_path: Path,
) -> None:
    ckpt = resuming(tmp_path)
    ckpt.save(1, {"weights.bin": b"older"})
    newer = os.urandom(13 * MIB)
    name = ckpt.save(2, {"weights.bin": newer})
    chunk = chunk_bytes_of(tmp_path, name, "weights.bin")
    flip(tmp_path / name / "weights.bin", 2 * chunk + 100)
    seen = bytearray()

    def load(checkpoint: Checkpoint) -> int:
        if checkpoint.step == 2:
            for piece in read_in_pieces(checkpoint.open("weights.bin"), 777_777):
                seen.extend(piece)
        return checkpoint.step

    resumed = ckpt.resume(load)

    assert resumed is not None and resumed.state == 1
    assert len(seen) <= 2 * chunk, "bytes of the damaged chunk (or beyond it) reached the loader"
    assert bytes(seen) == newer[: len(seen)]


class LoaderError(Exception):
    """What a framework's loader raises when the stream under it fails (torch raises its own errors)."""


def test_a_loader_that_wraps_or_swallows_the_damage_still_falls_back(tmp_path: Path) -> None:
    ckpt = resuming(tmp_path)
    ckpt.save(1, {"weights.bin": b"older"})
    name = ckpt.save(2, {"weights.bin": os.urandom(9 * MIB)})
    flip(tmp_path / name / "weights.bin", 5 * MIB)

    def wrapping(checkpoint: Checkpoint) -> bytes:
        try:
            return checkpoint.open("weights.bin").read()
        except Exception as e:
            raise LoaderError("could not read weights") from None if isinstance(e, CorruptCheckpoint) else e

    def swallowing(checkpoint: Checkpoint) -> bytes:
        try:
            return checkpoint.open("weights.bin").read()
        except Exception:
            return b"partial"

    for load in (wrapping, swallowing):
        resumed = ckpt.resume(load)
        assert resumed is not None and (resumed.step, resumed.state) == (1, b"older"), load.__name__


def test_the_loaders_own_error_is_raised_not_taken_for_damage(tmp_path: Path) -> None:
    ckpt = resuming(tmp_path)
    ckpt.save(1, {"weights.bin": b"older"})
    ckpt.save(2, {"weights.bin": b"newer"})
    attempts: list[int] = []

    def load(checkpoint: Checkpoint) -> None:
        attempts.append(checkpoint.step)
        raise LoaderError("shape mismatch")

    with pytest.raises(LoaderError, match="shape mismatch"):
        ckpt.resume(load)
    assert attempts == [2], "an older checkpoint was loaded after the loader's own error"


def test_a_file_of_another_size_or_a_missing_one_skips_the_checkpoint_before_loading(tmp_path: Path) -> None:
    ckpt = resuming(tmp_path)
    ckpt.save(1, {"a": b"older", "b": b"x"})
    truncated = ckpt.save(2, {"a": os.urandom(5 * MIB), "b": b"x"})
    missing = ckpt.save(3, {"a": b"y", "b": b"z"})
    (tmp_path / truncated / "a").write_bytes(b"short")
    (tmp_path / missing / "b").unlink()
    loaded: list[int] = []

    def load(checkpoint: Checkpoint) -> bytes:
        loaded.append(checkpoint.step)
        return checkpoint.files["a"]

    resumed = ckpt.resume(load)
    assert resumed is not None and resumed.state == b"older"
    assert loaded == [1]


def test_seeking_loaders_read_the_right_verified_bytes(tmp_path: Path) -> None:
    ckpt = resuming(tmp_path)
    data = os.urandom(11 * MIB + 17)
    ckpt.save(1, {"weights.bin": data})

    def load(checkpoint: Checkpoint) -> list[bytes]:
        stream = checkpoint.open("weights.bin")
        reads = []
        for offset, size in [(7 * MIB + 5, 100), (3, 4 * MIB), (0, 10), (len(data) - 9, 100)]:
            stream.seek(offset)
            reads.append(stream.read(size))
        stream.seek(-20, os.SEEK_END)
        reads.append(stream.read())
        assert stream.tell() == len(data)
        return reads

    resumed = ckpt.resume(load)
    assert resumed is not None
    assert resumed.state == [
        data[7 * MIB + 5 : 7 * MIB + 105],
        data[3 : 3 + 4 * MIB],
        data[:10],
        data[-9:],
        data[-20:],
    ]


def test_pickle_loads_from_the_stream(tmp_path: Path) -> None:
    ckpt = resuming(tmp_path)
    state: dict[str, Any] = {"step": 7, "weights": os.urandom(6 * MIB)}
    ckpt.save(7, {"state.pkl": pickle.dumps(state)})
    resumed = ckpt.resume(lambda c: pickle.load(c.open("state.pkl")))
    assert resumed is not None and resumed.state == state


def test_checkpoints_from_before_chunk_digests_still_resume(tmp_path: Path) -> None:
    import hashlib

    ckpt = resuming(tmp_path)
    data = os.urandom(5 * MIB)
    name = ckpt.save(4, {"weights.bin": data})
    manifest = json.loads((tmp_path / name / MANIFEST).read_text())
    manifest["format"] = 1
    manifest["files"]["weights.bin"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (tmp_path / name / MANIFEST).write_text(json.dumps(manifest))

    resumed = ckpt.resume(lambda c: c.files["weights.bin"])
    assert resumed is not None and resumed.state == data


def test_memory_stays_bounded_when_a_loader_reads_many_files_in_turn(tmp_path: Path) -> None:
    """A sharded checkpoint whose loader reads every shard's header, then every shard (as safetensors
    loaders do): what is read ahead and held stays a few chunks, however many files there are."""
    import tracemalloc

    ckpt = resuming(tmp_path)
    shards = {f"shard-{i:02d}.bin": os.urandom(5 * MIB + i) for i in range(24)}
    ckpt.save(1, shards)

    def load(checkpoint: Checkpoint) -> bool:
        streams = {name: checkpoint.open(name) for name in sorted(checkpoint.files)}
        headers = {name: stream.read(8) for name, stream in streams.items()}
        whole = True
        for name, stream in streams.items():
            for piece in read_in_pieces(stream, MIB):
                whole = whole and len(piece) <= MIB
            stream.seek(0)
            whole = whole and headers[name] == shards[name][:8] == stream.read(8)
        return whole

    tracemalloc.start()
    try:
        resumed = ckpt.resume(load)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert resumed is not None and resumed.state is True
    assert peak < 48 * MIB, f"held {peak / MIB:.0f} MiB at once reading 24 shards of 5 MiB"


def test_a_loader_may_read_its_files_in_parallel_threads(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    ckpt = resuming(tmp_path)
    shards = {f"shard-{i}.bin": os.urandom(6 * MIB + i) for i in range(8)}
    ckpt.save(1, shards)

    def load(checkpoint: Checkpoint) -> dict[str, bytes]:
        def read(name: str) -> bytes:
            return b"".join(read_in_pieces(checkpoint.open(name), 300_001))

        with ThreadPoolExecutor(4) as pool:
            return dict(zip(checkpoint.files, pool.map(read, checkpoint.files), strict=True))

    resumed = ckpt.resume(load)
    assert resumed is not None and resumed.state == shards
