"""``together-gpu-checkpoint``, the checkpoint runtime's own distribution (``runtime/``), as a training image
installs it: alone, without Pulumi, gRPC, pydantic or the emulator. It owns
``together_clusters.components.checkpoint`` (the import path training code writes, unchanged) and every fact
that package needs; the main distribution ships none of its files and depends on it. Both install into one
environment in either order, and removing the main one leaves a working runtime.

Measured: installed alone into a fresh virtualenv it takes 1.9 MB of site-packages (1.5 MB without bytecode:
the runtime, blake3 and typing-extensions); its ``s3`` extra (boto3) brings it to 39 MB. The main package
without extras takes 145 MB measured the same way.
"""

from __future__ import annotations

import email.parser
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests import _engine
from together_clusters._extras import MODULES

from .conftest import Distributions, InstalledVenv, fresh_venv, site_packages, tree_bytes
from .test_distributions import wheel_metadata

ROOT = _engine.ROOT
SIZE_LIMIT = 5 * 2**20
"""The runtime's install stays small enough to add to any training image without a second thought."""

SAVE = """
from together_clusters.components.checkpoint import Checkpointer
ckpt = Checkpointer.from_env()
print(ckpt.save(7, {"weights.bin": b"w" * 300_000, "optimizer.bin": [b"o" * 1000, b"p"]}))
"""
RESTORE = """
import hashlib
from together_clusters.components.checkpoint import Checkpointer
with Checkpointer.from_env().restore() as checkpoint:
    print(checkpoint.step, hashlib.sha256(checkpoint.files["weights.bin"]).hexdigest(),
          checkpoint.files["optimizer.bin"][-2:].decode())
"""


@pytest.fixture(scope="session")
def runtime(runtime_distributions: Distributions, tmp_path_factory: pytest.TempPathFactory) -> InstalledVenv:
    """The runtime's wheel alone, without extras, in a fresh virtualenv."""
    home = tmp_path_factory.mktemp("training-image")
    return fresh_venv(home / "venv", runtime_distributions.wheel)


def wheel_files(wheel: Path, metadata_prefix: str) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as archive:
        return {n: archive.read(n) for n in archive.namelist() if not n.startswith(metadata_prefix)}


def test_the_runtime_ships_the_checkpoint_package_alone_and_the_main_wheel_none_of_it(
    runtime_distributions: Distributions, distributions: Distributions
) -> None:
    files = wheel_files(runtime_distributions.wheel, "together_gpu_checkpoint-")
    source = ROOT / "runtime" / "together_clusters" / "components" / "checkpoint"
    expected = {
        f"together_clusters/components/checkpoint/{p.relative_to(source)}"
        for p in source.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    # Not together_clusters/__init__.py nor components/__init__.py: those are the main distribution's.
    assert set(files) == expected
    assert not [n for n, data in files.items() if b"import pulumi" in data or b"from pulumi" in data]
    main = wheel_files(distributions.wheel, "together_gpu_clusters-")
    assert set(main) & set(files) == set(), "the two wheels share files"

    meta = wheel_metadata(runtime_distributions.wheel)
    assert meta["Name"] == "together-gpu-checkpoint"
    assert meta["Version"] == wheel_metadata(distributions.wheel)["Version"]
    assert meta.get_all("Provides-Extra") == ["s3"]
    assert set(meta.get_all("Provides-Extra")) <= set(MODULES), "together_clusters._extras knows each extra"
    (needed,) = [
        r
        for r in map(Requirement, wheel_metadata(distributions.wheel).get_all("Requires-Dist") or [])
        if r.name == "together-gpu-checkpoint" and not r.marker
    ]
    assert needed.specifier.contains(meta["Version"]), (
        f"the main wheel needs {needed}, the runtime is {meta['Version']}"
    )


def test_a_training_image_with_only_the_runtime_saves_and_restores_a_checkpoint(
    runtime: InstalledVenv, tmp_path: Path
) -> None:
    env = {"CHECKPOINT_DIR": str(tmp_path / "ckpt"), "CHECKPOINT_RESUME": "true"}
    saved = runtime.run_with(env, runtime.python, "-I", "-c", SAVE, cwd=tmp_path)
    assert saved.returncode == 0, saved.stderr
    restored = runtime.run_with(env, runtime.python, "-I", "-c", RESTORE, cwd=tmp_path)
    assert restored.returncode == 0, restored.stderr
    step, digest, tail = restored.stdout.split()
    assert (step, tail) == ("7", "op")
    assert digest == __import__("hashlib").sha256(b"w" * 300_000).hexdigest()

    absent = runtime.run(
        runtime.python,
        "-I",
        "-c",
        "import importlib.util as u; print([m for m in ('pulumi', 'pulumi_kubernetes', 'grpc', 'pydantic',"
        " 'httpx', 'boto3') if u.find_spec(m)])",
        cwd=tmp_path,
    )
    assert absent.stdout.strip() == "[]", absent.stderr
    assert tree_bytes(site_packages(runtime)) < SIZE_LIMIT


def test_s3_checkpoints_without_the_extra_name_the_runtime_s_pip_install(
    runtime: InstalledVenv, tmp_path: Path
) -> None:
    script = (
        "from together_clusters.components.checkpoint import S3Backend\n"
        "from together_clusters.components.checkpoint.errors import S3ExtraMissing\n"
        "try:\n    S3Backend('bucket')\nexcept ImportError as e:\n    print(type(e).__name__, e)\n"
    )
    ran = runtime.run(runtime.python, "-I", "-c", script, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == (
        "S3ExtraMissing S3 checkpoints need boto3, which is not installed: "
        "pip install 'together-gpu-checkpoint[s3]' (or 'together-gpu-clusters[s3]')\n"
    )


MAIN_SMOKE = """
import together_clusters
from together_clusters.errors import CorruptCheckpoint, TogetherError
from together_clusters.platform import GRACE_PERIOD_LIMIT_SECONDS
from together_clusters.components.checkpoint.errors import CorruptCheckpoint as Theirs
assert CorruptCheckpoint is Theirs and GRACE_PERIOD_LIMIT_SECONDS == 300
print("main ok")
"""


@pytest.mark.parametrize("first", ["runtime", "main"])
def test_both_distributions_install_in_either_order_and_removing_the_main_one_keeps_the_runtime(
    first: str, distributions: Distributions, runtime_distributions: Distributions, tmp_path: Path
) -> None:
    """The two wheels without their other dependencies (blake3 only), one after the other, in a fresh
    virtualenv: each one's smoke test passes with both there, and the runtime's still passes once the main
    distribution is uninstalled (no file of the runtime went with it)."""
    order = {"runtime": runtime_distributions.wheel, "main": distributions.wheel}
    second = "main" if first == "runtime" else "runtime"
    env = fresh_venv(tmp_path / "venv", "blake3")
    pip = [sys.executable, "-m", "pip", "--python", str(env.python)]
    for name in (first, second):
        ran = env.run(*pip, "install", "--quiet", "--no-deps", order[name], cwd=tmp_path)
        assert ran.returncode == 0, ran.stderr
    checkpoint_env = {"CHECKPOINT_DIR": str(tmp_path / "ckpt"), "CHECKPOINT_RESUME": "true"}

    main = env.run(env.python, "-I", "-c", MAIN_SMOKE, cwd=tmp_path)
    assert main.stdout == "main ok\n", main.stderr
    saved = env.run_with(checkpoint_env, env.python, "-I", "-c", SAVE, cwd=tmp_path)
    assert saved.returncode == 0, saved.stderr

    removed = env.run(*pip, "uninstall", "--yes", "together-gpu-clusters", cwd=tmp_path)
    assert removed.returncode == 0, removed.stderr
    restored = env.run_with(checkpoint_env, env.python, "-I", "-c", RESTORE, cwd=tmp_path)
    assert restored.returncode == 0, restored.stderr
    assert restored.stdout.split()[0] == "7"
    gone = env.run(env.python, "-I", "-c", "import together_clusters.errors", cwd=tmp_path)
    assert "No module named 'together_clusters.errors'" in gone.stderr


def test_the_runtime_readme_states_what_the_package_does(runtime_distributions: Distributions) -> None:
    with zipfile.ZipFile(runtime_distributions.wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        body = email.parser.Parser().parsestr(archive.read(name).decode()).get_payload()
    assert "pip install together-gpu-checkpoint" in body
    assert "from together_clusters.components.checkpoint import" in body
