"""Checkpointer on the filesystem: atomic layout, corrupt checkpoints skipped, last N kept, env contract."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from blake3 import blake3

from together_clusters.components.checkpoint import (
    Checkpointer,
    CorruptCheckpoint,
    FilesystemBackend,
    RuntimeConfig,
    trial_parameters,
)
from together_clusters.components.checkpoint.checkpointer import MANIFEST
from together_clusters.components.checkpoint.contract import drain_budget_seconds, save_budget_seconds

from .conftest import ROOT
from .worker import state_for


def test_save_writes_files_then_a_manifest_with_checksums(tmp_path: Path) -> None:
    ckpt = Checkpointer(FilesystemBackend(tmp_path), keep=3)
    name = ckpt.save(7, state_for(7), metadata={"epoch": 1})
    manifest = json.loads((tmp_path / name / MANIFEST).read_text())
    assert manifest["step"] == 7
    assert manifest["metadata"] == {"epoch": 1}
    assert set(manifest["files"]) == {"state.json", "weights.bin"}
    for file_name, data in state_for(7).items():
        entry = manifest["files"][file_name]
        chunk = entry["chunk_bytes"]
        slices = [data[i : i + chunk] for i in range(0, len(data), chunk)]
        assert entry["size"] == len(data)
        assert entry["chunk_blake3"] == [blake3(s).hexdigest() for s in slices]
    loaded = ckpt.latest()
    assert loaded is not None and loaded.step == 7 and loaded.files == state_for(7) and loaded.name == name


def test_chunked_files_are_saved_whole(tmp_path: Path) -> None:
    ckpt = Checkpointer(FilesystemBackend(tmp_path))
    ckpt.save(1, {"big": iter([b"a" * 10, b"b" * 10])})
    loaded = ckpt.latest()
    assert loaded is not None and loaded.files["big"] == b"a" * 10 + b"b" * 10


def test_a_corrupt_checkpoint_is_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ckpt = Checkpointer(FilesystemBackend(tmp_path))
    ckpt.save(1, state_for(1))
    newest = ckpt.save(2, state_for(2))
    weights = tmp_path / newest / "weights.bin"
    data = bytearray(weights.read_bytes())
    data[100] ^= 0xFF
    weights.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="together_clusters.components.checkpoint"):
        loaded = ckpt.latest()
    assert loaded is not None and loaded.step == 1 and loaded.files == state_for(1)
    (record,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert f"skipping corrupt checkpoint {newest}" in record.getMessage()
    assert "weights.bin" in record.getMessage()
    with pytest.raises(CorruptCheckpoint):
        ckpt.load(newest)


def test_missing_file_and_unreadable_manifest_are_corrupt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ckpt = Checkpointer(FilesystemBackend(tmp_path), keep=5)
    ckpt.save(1, state_for(1))
    second = ckpt.save(2, state_for(2))
    third = ckpt.save(3, state_for(3))
    (tmp_path / third / "state.json").unlink()
    (tmp_path / second / MANIFEST).write_text("{not json")
    with caplog.at_level(logging.WARNING):
        loaded = ckpt.latest()
    assert loaded is not None and loaded.step == 1
    assert len([r for r in caplog.records if "skipping corrupt" in r.getMessage()]) == 2


def test_only_the_last_n_are_kept(tmp_path: Path) -> None:
    ckpt = Checkpointer(FilesystemBackend(tmp_path), keep=2)
    for step in range(1, 6):
        ckpt.save(step, {"s": str(step).encode()})
    remaining = sorted(p.name for p in tmp_path.iterdir())
    assert len(remaining) == 2
    assert [json.loads((tmp_path / n / MANIFEST).read_text())["step"] for n in remaining] == [4, 5]


def test_newest_means_highest_step_then_latest_write(tmp_path: Path) -> None:
    ckpt = Checkpointer(FilesystemBackend(tmp_path), keep=5)
    ckpt.save(10, {"s": b"first"})
    ckpt.save(10, {"s": b"again"})
    ckpt.save(9, {"s": b"older step"})
    loaded = ckpt.latest()
    assert loaded is not None and loaded.files == {"s": b"again"}


def test_empty_or_missing_directory_has_no_checkpoint(tmp_path: Path) -> None:
    assert Checkpointer(FilesystemBackend(tmp_path / "nothing")).latest() is None


def test_from_env_follows_the_contract(tmp_path: Path) -> None:
    env = {
        "CHECKPOINT_DIR": str(tmp_path),
        "CHECKPOINT_KEEP": "4",
        "CHECKPOINT_RESUME": "true",
        "CHECKPOINT_SAVE_BUDGET_SECONDS": "42",
    }
    ckpt = Checkpointer.from_env(env)
    assert isinstance(ckpt.backend, FilesystemBackend) and ckpt.backend.root == tmp_path
    assert ckpt.keep == 4 and ckpt.config.save_budget_seconds == 42.0
    ckpt.save(3, {"s": b"x"})
    restored = ckpt.restore()
    assert restored is not None and restored.step == 3
    assert Checkpointer.from_env({**env, "CHECKPOINT_RESUME": "false"}).restore() is None
    with pytest.raises(ValueError, match="CHECKPOINT_DIR is not set"):
        Checkpointer.from_env({})
    with pytest.raises(ValueError, match="unknown CHECKPOINT_BACKEND"):
        Checkpointer.from_env({"CHECKPOINT_BACKEND": "tape"})


def test_budgets_stay_inside_the_grace_period() -> None:
    assert RuntimeConfig().save_budget_seconds == 270
    for grace in (1, 5, 30, 120, 300):
        assert 0 < save_budget_seconds(grace) <= max(1, grace - 1)
        assert 0 < drain_budget_seconds(grace, 0) <= max(1, grace - 1)
    assert drain_budget_seconds(300, 10) < save_budget_seconds(300)


def test_invalid_names_are_refused(tmp_path: Path) -> None:
    ckpt = Checkpointer(FilesystemBackend(tmp_path))
    for bad in ("../escape", ".hidden", MANIFEST):
        with pytest.raises(ValueError):
            ckpt.save(1, {bad: b"x"})


def test_trial_parameters_come_from_the_index(tmp_path: Path) -> None:
    trials = tmp_path / "trials.json"
    trials.write_text(json.dumps([{"lr": 1}, {"lr": 2}]))
    assert trial_parameters({"TRIAL_INDEX": "1", "TRIAL_PARAMETERS_FILE": str(trials)}) == {"lr": 2}


def test_the_runtime_imports_without_pulumi() -> None:
    code = (
        "import sys; sys.modules['pulumi'] = None; sys.modules['pulumi_kubernetes'] = None\n"
        "import together_clusters.components.checkpoint, together_clusters.components.guard\n"
        "import together_clusters.components.manifests, together_clusters.components.placement\n"
        "from together_clusters import components\n"
        "try:\n    components.BatchJob\nexcept ImportError:\n    print('lazy')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "lazy"


def test_a_save_never_deletes_the_checkpoint_it_wrote(tmp_path: Path) -> None:
    # A run restarted from scratch next to the checkpoints of an earlier, longer run.
    ckpt = Checkpointer(FilesystemBackend(tmp_path), keep=1)
    ckpt.save(300, {"s": b"earlier run"})
    name = ckpt.save(1, {"s": b"this run"})
    assert [p.name for p in tmp_path.iterdir()] == [name]
    loaded = ckpt.latest()
    assert loaded is not None and loaded.files == {"s": b"this run"}


def test_a_corrupt_newer_checkpoint_does_not_cost_the_one_just_saved(tmp_path: Path) -> None:
    ckpt = Checkpointer(FilesystemBackend(tmp_path), keep=1)
    corrupt = ckpt.save(10, {"s": b"ten"})
    (tmp_path / corrupt / "s").write_bytes(b"bit rot")
    assert ckpt.latest() is None
    ckpt.save(3, {"s": b"three"})
    loaded = ckpt.latest()
    assert loaded is not None and loaded.step == 3


def test_an_unfinished_entry_newer_than_every_checkpoint_is_left_alone(tmp_path: Path) -> None:
    ckpt = Checkpointer(FilesystemBackend(tmp_path), keep=1)
    ckpt.backend.write("ckpt-000000000009-00000000000000000000", "s", [b"in progress"])
    older_torn = "ckpt-000000000001-00000000000000000000"
    ckpt.backend.write(older_torn, "s", [b"died"])
    name = ckpt.save(5, {"s": b"five"})
    assert sorted(p.name for p in tmp_path.iterdir()) == [name, "ckpt-000000000009-00000000000000000000"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "deleted entries left behind"


@pytest.mark.parametrize(
    ("manifest", "reason"),
    [
        ("[1, 2]", "not an object"),
        ('{"format": 1, "files": {}}', "malformed manifest"),
        ('{"format": 1, "step": 1, "files": []}', "malformed manifest"),
        ('{"format": 1, "step": "x", "files": {}}', "malformed manifest"),
        ('{"format": 1, "step": 1, "files": {"s": "sha"}}', "not an object"),
        ('{"format": 1, "step": 1, "files": {"../s": {"size": 1, "sha256": "x"}}}', "invalid file name"),
        ('{"format": 99, "step": 1, "files": {}}', "manifest format 99"),
    ],
)
def test_a_malformed_manifest_is_corrupt_not_a_crash(
    tmp_path: Path, manifest: str, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    ckpt = Checkpointer(FilesystemBackend(tmp_path), keep=5)
    ckpt.save(1, {"s": b"good"})
    bad = ckpt.save(2, {"s": b"x"})
    (tmp_path / bad / MANIFEST).write_text(manifest)
    with pytest.raises(CorruptCheckpoint, match=reason):
        ckpt.load(bad)
    with caplog.at_level(logging.WARNING):
        loaded = ckpt.latest()
    assert loaded is not None and loaded.step == 1
    assert any(f"skipping corrupt checkpoint {bad}" in r.getMessage() for r in caplog.records)
