"""The wheel without extras, as a project that only declares clusters and workloads installs it, at the
lowest and at the newest pulumi-kubernetes the version ranges admit: it installs, the Cluster resource and
the components import, and a BatchJob renders its Kubernetes objects through that version's Python SDK
(under Pulumi's mocks). The emulator, the twin, the status chart and S3 checkpoints are extras: none of
their libraries is there, and each feature says which extra to install.

A real ``pulumi up`` with the newest pulumi-kubernetes would need its provider plugin built from its Go
module (tools/engine builds only the pinned one, in minutes): this test installs and imports it and renders
through its SDK; the engine tests deploy with the pinned version, the lowest supported.

Cost: the two virtualenvs are made once per session (about 10 s each with a warm pip cache); measured on
the shared 2-core machine the whole module takes about 32 s including the wheel's build. The core install
measured 90 MB in site-packages (145 MB with bytecode; pip not counted), 37 distributions; it was 327 MB
(471 MB), 69 distributions, when the extras' libraries were core dependencies.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests import _engine

from .conftest import Distributions, InstalledVenv, fresh_venv

ROOT = _engine.ROOT
HERE = Path(__file__).parent
NEWEST_PULUMI_KUBERNETES = "4.34.2"
"""The newest pulumi-kubernetes on PyPI when this was written; raise it as new ones are released."""
OPTIONAL = {"fastapi", "uvicorn", "starlette", "matplotlib", "kubernetes", "cryptography", "boto3"}


def core_requirement(name: str) -> Requirement:
    """The core dependency ``name`` as pyproject.toml declares it."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (found,) = [r for r in map(Requirement, project["dependencies"]) if r.name == name]
    return found


def lowest(name: str) -> str:
    """The lower bound of the core dependency ``name``'s range."""
    (bound,) = [s.version for s in core_requirement(name).specifier if s.operator == ">="]
    return bound


@pytest.fixture(scope="session", params=["lowest", "newest"])
def core(
    request: pytest.FixtureRequest, distributions: Distributions, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, InstalledVenv]:
    """The wheel without extras in a fresh virtualenv: with the lowest pulumi and pulumi-kubernetes, or
    with the newest pulumi-kubernetes (and whichever pulumi pip picks for it)."""
    if request.param == "lowest":
        pins = [f"pulumi=={lowest('pulumi')}", f"pulumi-kubernetes=={lowest('pulumi-kubernetes')}"]
    else:
        assert core_requirement("pulumi-kubernetes").specifier.contains(NEWEST_PULUMI_KUBERNETES)
        pins = [f"pulumi-kubernetes=={NEWEST_PULUMI_KUBERNETES}"]
    home = tmp_path_factory.mktemp(f"core-{request.param}")
    return request.param, fresh_venv(home / "venv", distributions.wheel, *distributions.companions, *pins)


def test_the_core_install_renders_a_batch_job_without_the_extras_libraries(
    core: tuple[str, InstalledVenv], tmp_path: Path
) -> None:
    which, env = core
    probe = env.run(env.python, "-I", HERE / "_core_probe.py", cwd=tmp_path)
    assert probe.returncode == 0, probe.stderr
    seen = json.loads(probe.stdout)

    expected = lowest("pulumi-kubernetes") if which == "lowest" else NEWEST_PULUMI_KUBERNETES
    assert Requirement(f"pulumi-kubernetes=={expected}").specifier.contains(seen["pulumi-kubernetes"])
    if which == "lowest":
        assert Requirement(f"pulumi=={lowest('pulumi')}").specifier.contains(seen["pulumi"])
    assert Path(seen["package"]).resolve().is_relative_to(env.path.resolve())
    assert seen["importable"] == []
    assert seen["provider"] == "together_clusters.provider.resource.Cluster/ClusterArgs"
    assert "JobSet/ft" in seen["objects"], seen["objects"]
    assert "together:components:BatchJob" in seen["types"], seen["types"]


def test_each_feature_of_an_extra_names_the_pip_install_on_one_line(
    core: tuple[str, InstalledVenv], tmp_path: Path
) -> None:
    _, env = core
    emulator = env.run(env.python, "-m", "together_clusters.emulator", "--port", "0", cwd=tmp_path)
    assert (emulator.returncode, emulator.stdout) == (1, "")
    assert emulator.stderr == (
        "python -m together_clusters.emulator: error: the emulator needs the 'emulator' extra "
        "(uvicorn is not installed): pip install 'together-gpu-clusters[emulator]'\n"
    )
    drill = env.run(env.bin("together-clusters"), "drill", cwd=tmp_path)
    assert drill.returncode == 1
    assert drill.stderr == (
        "together-clusters drill: error: together-clusters drill needs the 'drill' extra "
        "(kubernetes is not installed): pip install 'together-gpu-clusters[drill]'\n"
    )

    uses = {"plot": "from together_clusters.cli.status.plot import write_png; write_png('t.png', 'dev', [])"}
    for extra, use in uses.items():
        script = (
            "from together_clusters.errors import MissingExtraError\n"
            f"try:\n    {use}\nexcept MissingExtraError as e:\n    print(e.extra, e.name, e.install_command)\n"
        )
        ran = env.run(env.python, "-I", "-c", script, cwd=tmp_path)
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.split(" ", 2)[0] == extra
        assert ran.stdout.strip().endswith(f"pip install 'together-gpu-clusters[{extra}]'")

    # S3 checkpoints are the runtime's (a distribution of its own): its error names both ways to the extra.
    script = (
        "from together_clusters.errors import S3ExtraMissing\n"
        "from together_clusters.components.checkpoint import S3Backend\n"
        "try:\n    S3Backend('bucket')\nexcept S3ExtraMissing as e:\n    print(e)\n"
    )
    ran = env.run(env.python, "-I", "-c", script, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip().endswith(
        "pip install 'together-gpu-checkpoint[s3]' (or 'together-gpu-clusters[s3]')"
    )


def test_the_native_plugin_works_on_the_lowest_and_newest_pulumi(
    core: tuple[str, InstalledVenv], tmp_path: Path
) -> None:
    which, env = core
    probe = env.run(env.python, "-I", HERE / "_native_probe.py", cwd=tmp_path)
    assert probe.returncode == 0, probe.stderr
    seen = json.loads(probe.stdout)
    if which == "lowest":
        assert Requirement(f"pulumi=={lowest('pulumi')}").specifier.contains(seen["pulumi"])
    assert seen["schema_version"] == seen["package"]
    assert seen["failures"] == ["numGpus"]
    assert seen["round_trip"] == {
        "volume_id": "04da6b54-80e4-46f7-96ec-b56ff0331ba9",
        "kube_config": "k",
        "num_gpus": 8,
    }
    assert seen["secret"] is True
