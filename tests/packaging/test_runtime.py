"""``together-gpu-checkpoint``, the checkpoint runtime's own distribution (``runtime/``), as a training image
installs it: alone, without Pulumi, gRPC, pydantic or the emulator. It ships the same files as the main
package's runtime, byte for byte, so code written against either runs on the other.

Measured: installed alone into a fresh virtualenv it takes 1.9 MB of site-packages (1.5 MB without bytecode:
the runtime, blake3 and typing-extensions); its ``s3`` extra (boto3) brings it to 39 MB. The main package
without extras takes 145 MB measured the same way.
"""

from __future__ import annotations

import email.parser
import zipfile
from pathlib import Path

import pytest

from tests import _engine
from together_clusters._extras import MODULES

from .conftest import Distributions, InstalledVenv, fresh_venv, site_packages, tree_bytes
from .test_distributions import source_files, wheel_metadata

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


def runtime_wheel_files(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as archive:
        return {
            n: archive.read(n) for n in archive.namelist() if not n.startswith("together_gpu_checkpoint-")
        }


def test_the_runtime_ships_the_checkpoint_package_and_only_pulumi_free_modules(
    runtime_distributions: Distributions, distributions: Distributions
) -> None:
    files = runtime_wheel_files(runtime_distributions.wheel)
    checkpoint = {f for f in source_files() if f.startswith("together_clusters/components/checkpoint/")}
    assert checkpoint <= set(files)
    assert set(files) <= source_files()
    with zipfile.ZipFile(distributions.wheel) as main:
        assert all(main.read(name) == data for name, data in files.items()), "the two wheels' copies differ"
    assert not [n for n, data in files.items() if b"import pulumi" in data]

    meta = wheel_metadata(runtime_distributions.wheel)
    assert meta["Name"] == "together-gpu-checkpoint"
    assert meta["Version"] == wheel_metadata(distributions.wheel)["Version"]
    assert meta.get_all("Provides-Extra") == ["s3"]
    assert set(meta.get_all("Provides-Extra")) <= set(MODULES), "together_clusters._extras knows each extra"


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
        "from together_clusters.errors import MissingExtraError\n"
        "from together_clusters.components.checkpoint import S3Backend\n"
        "try:\n    S3Backend('bucket')\nexcept MissingExtraError as e:\n    print(e)\n"
    )
    ran = runtime.run(runtime.python, "-I", "-c", script, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == (
        "S3 checkpoints needs the 's3' extra (boto3 is not installed): "
        "pip install 'together-gpu-checkpoint[s3]'\n"
    )


def test_the_runtime_readme_states_what_the_package_does(runtime_distributions: Distributions) -> None:
    with zipfile.ZipFile(runtime_distributions.wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        body = email.parser.Parser().parsestr(archive.read(name).decode()).get_payload()
    assert "pip install together-gpu-checkpoint" in body and "Never install both" in body
