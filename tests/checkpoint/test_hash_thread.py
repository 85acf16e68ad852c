"""Checkpoint I/O hashes in a thread of its own (components/checkpoint/storage.py): what a user relies on
still holds where no thread can start, and when the producer reuses its buffer."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from together_clusters.components.checkpoint import Checkpointer, FilesystemBackend

from .conftest import ROOT

SAVE_AT_EXIT = """
import atexit, sys
from together_clusters.components.checkpoint import Checkpointer, FilesystemBackend

checkpointer = Checkpointer(FilesystemBackend(sys.argv[1]), keep=2)
atexit.register(lambda: checkpointer.save(7, {"weights.bin": [b"w" * (9 << 20)]}))
"""


def test_a_save_from_an_atexit_handler_is_written(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SAVE_AT_EXIT, str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "Error" not in done.stderr, done.stderr
    restored = Checkpointer(FilesystemBackend(tmp_path)).latest()
    assert restored is not None and restored.step == 7
    with restored:
        assert restored.open("weights.bin").read() == b"w" * (9 << 20)


def test_a_producer_reusing_its_buffer_is_saved_and_verified_byte_for_byte(tmp_path: Path) -> None:
    pieces = [bytes([i]) * (3 << 20) for i in range(5)]

    def reused() -> Iterator[bytearray]:
        buffer = bytearray(3 << 20)
        for piece in pieces:
            buffer[:] = piece
            yield buffer

    checkpointer = Checkpointer(FilesystemBackend(tmp_path), keep=1)
    checkpointer.save(1, {"data.bin": reused()})
    restored = checkpointer.latest()
    assert restored is not None
    with restored:
        assert (
            hashlib.sha256(restored.open("data.bin").read()).digest()
            == hashlib.sha256(b"".join(pieces)).digest()
        )
