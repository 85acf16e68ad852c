"""The package as a user gets it: the wheel and sdist built by ``python -m build``, and a fresh virtualenv
outside the repository with the wheel installed (not editable), shared by every test of the session.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import venv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests import _engine

ROOT = _engine.ROOT


@dataclass(frozen=True)
class Distributions:
    """The sdist and the wheel built from it, and the wheels of this repository's other distributions that
    it depends on (the main one needs the checkpoint runtime's, which no index serves: it is ours)."""

    sdist: Path
    wheel: Path
    companions: tuple[Path, ...] = ()


@dataclass(frozen=True)
class InstalledVenv:
    """A virtualenv with only the wheel (and its dependencies) installed."""

    path: Path

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    def bin(self, name: str) -> Path:
        return self.path / "bin" / name

    def run(self, *args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
        """Run a command of this virtualenv with nothing of the repository on the path."""
        return self.run_with({}, *args, cwd=cwd)

    def run_with(
        self, environ: dict[str, str], *args: str | Path, cwd: Path
    ) -> subprocess.CompletedProcess[str]:
        """:meth:`run` with ``environ`` added to the environment."""
        return subprocess.run(
            [str(a) for a in args],
            cwd=cwd,
            env={**clean_env(), **environ},
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )


def clean_env() -> dict[str, str]:
    """The environment without anything that would let a child process import the repository's copy."""
    env = dict(os.environ)
    for name in ("PYTHONPATH", "VIRTUAL_ENV", "PULUMI_RUNTIME_VIRTUALENV", "PYTHONHOME"):
        env.pop(name, None)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _check(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, f"$ {' '.join(map(str, proc.args))}\n{proc.stdout}\n{proc.stderr}"
    return proc


def checkout_names() -> list[str]:
    """The checkout's files as a clone would have them: tracked, or new and not ignored (paths from ROOT)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return list(filter(None, listed.split("\0")))


def _source_tree(into: Path) -> Path:
    """The checkout's files as a clone would have them (tracked, or new and not ignored): a build from the
    working tree itself would also pack what a stale ``*.egg-info/SOURCES.txt`` of an earlier layout still
    lists."""
    for name in checkout_names():
        origin, copy = ROOT / name, into / name
        if not os.path.lexists(origin):
            continue  # deleted in the working tree, not yet in the index
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(origin, copy, follow_symlinks=False)
    return into


def _build(source: Path, outdir: Path) -> Distributions:
    """``python -m build``: the sdist from ``source``, then the wheel from the sdist (the front end's default)."""
    _check(
        subprocess.run(
            [sys.executable, "-m", "build", "--outdir", str(outdir), str(source)],
            cwd=outdir,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    )
    (sdist,) = outdir.glob("*.tar.gz")
    (wheel,) = outdir.glob("*.whl")
    return Distributions(sdist, wheel)


@pytest.fixture(scope="session")
def source_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The checkout's files as a clone would have them (see ``_source_tree``)."""
    return _source_tree(tmp_path_factory.mktemp("source"))


@pytest.fixture(scope="session")
def distributions(
    source_tree: Path, runtime_distributions: Distributions, tmp_path_factory: pytest.TempPathFactory
) -> Distributions:
    """``python -m build``: the sdist from the checkout, then the wheel from the sdist (the front end's default),
    with the runtime's wheel it depends on."""
    built = _build(source_tree, tmp_path_factory.mktemp("dist"))
    return Distributions(built.sdist, built.wheel, companions=(runtime_distributions.wheel,))


@pytest.fixture(scope="session")
def runtime_distributions(source_tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Distributions:
    """``python -m build runtime/``: the checkpoint runtime's own distribution, ``together-gpu-checkpoint``."""
    return _build(source_tree / "runtime", tmp_path_factory.mktemp("runtime-dist"))


@pytest.fixture(scope="session")
def installed(
    distributions: Distributions, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[InstalledVenv]:
    """A fresh virtualenv outside the repository with the wheel and its ``emulator`` extra installed from
    the file (pip's cache serves the dependencies): a user's project deploying against the emulator, on the
    Pulumi versions of the engine the repository builds (it has no other kubernetes plugin, and downloads
    none)."""
    yield user_venv(distributions, tmp_path_factory.mktemp("user"), "emulator")


def user_venv(distributions: Distributions, home: Path, *extras: str) -> InstalledVenv:
    """A fresh virtualenv in ``home`` (outside the repository) with the wheel and ``extras`` installed from the
    file, on the engine's Pulumi versions (see :func:`installed`)."""
    assert not home.resolve().is_relative_to(ROOT)
    env = InstalledVenv(home / "venv")
    venv.EnvBuilder(with_pip=True).create(env.path)
    wheel = f"{distributions.wheel}[{','.join(extras)}]"
    install = ["install", "--quiet", wheel, *map(str, distributions.companions), *engine_pins()]
    _check(env.run(env.python, "-m", "pip", *install, cwd=home))
    return env


def engine_pins() -> list[str]:
    """The ``pulumi==`` and ``pulumi-kubernetes==`` pins of the ``test`` extra: the versions scripts/install-engine
    builds the engine and the kubernetes plugin at."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    pins = [r for r in map(Requirement, extras["test"]) if r.name in ("pulumi", "pulumi-kubernetes")]
    assert [str(s.operator) for r in pins for s in r.specifier] == ["==", "=="], pins
    return [str(r) for r in pins]


def fresh_venv(path: Path, *requirements: str | Path) -> InstalledVenv:
    """A virtualenv at ``path`` (outside the repository) holding only ``requirements`` and their dependencies:
    no pip or setuptools of its own (the suite's pip installs into it with ``--python``), so its
    site-packages is exactly what a user's install brings."""
    assert not path.resolve().is_relative_to(ROOT)
    env = InstalledVenv(path)
    venv.EnvBuilder(with_pip=False).create(env.path)
    pip = [sys.executable, "-m", "pip", "--python", env.python, "install", "--quiet", *requirements]
    _check(env.run(*pip, cwd=path))
    return env


def site_packages(env: InstalledVenv) -> Path:
    (found,) = env.path.glob("lib/python*/site-packages")
    return found


def tree_bytes(folder: Path, *, bytecode: bool = True) -> int:
    """The bytes of every file under ``folder`` (``__pycache__`` folders left out unless ``bytecode``)."""
    return sum(
        f.stat().st_size
        for f in folder.rglob("*")
        if f.is_file() and not f.is_symlink() and (bytecode or "__pycache__" not in f.parts)
    )
