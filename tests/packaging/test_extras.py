"""A feature whose extra is not installed fails where it is used, with one line naming the ``pip install``
(the core install's own commands are checked in test_core_install.py; here the helper, and the twin's
``--kubernetes``, whose extra comes on top of the emulator's, with the twin's libraries hidden)."""

from __future__ import annotations

import subprocess
import sys
import tomllib

import pytest

from tests import _engine
from together_clusters._extras import MODULES, requires_extra
from together_clusters.errors import MissingExtraError, TogetherError

from .conftest import clean_env

ROOT = _engine.ROOT

HIDE_THE_TWIN = """
import runpy, sys
sys.modules["kubernetes"] = None  # as if the 'twin' extra were not installed
sys.modules["cryptography"] = None
import together_clusters.emulator.kubernetes.binaries as binaries
binaries.require = lambda **kwargs: None  # the control plane's programs are not what this is about
sys.argv = ["python -m together_clusters.emulator", "--port", "0", "--kubernetes"]
runpy.run_module("together_clusters.emulator", run_name="__main__")
"""


def test_a_missing_module_of_the_extra_becomes_a_missing_extra_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(MissingExtraError) as caught, requires_extra("plot", "the status chart (--png)"):
        import matplotlib  # noqa: F401
    error = caught.value
    assert isinstance(error, TogetherError) and isinstance(error, ImportError)
    assert (error.extra, error.name, error.distribution) == ("plot", "matplotlib", "together-gpu-clusters")
    assert str(error) == (
        "the status chart (--png) needs the 'plot' extra (matplotlib is not installed): "
        "pip install 'together-gpu-clusters[plot]'"
    )
    assert isinstance(error.__cause__, ModuleNotFoundError)


def test_any_other_import_failure_is_raised_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "numpy", None)  # matplotlib's own dependency: a broken install
    with pytest.raises(ModuleNotFoundError) as caught, requires_extra("plot", "the status chart (--png)"):
        import numpy  # noqa: F401
    assert not isinstance(caught.value, MissingExtraError)


def test_every_extra_the_helper_names_is_declared() -> None:
    main = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(MODULES) <= set(main)


def test_the_twin_without_its_extra_says_so_on_one_line() -> None:
    ran = subprocess.run(
        [sys.executable, "-c", HIDE_THE_TWIN],
        cwd=ROOT,
        env={**clean_env(), "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (ran.returncode, ran.stdout) == (1, "")
    assert ran.stderr == (
        "python -m together_clusters.emulator: error: the emulator's Kubernetes twin (--kubernetes) needs the "
        "'twin' extra (kubernetes is not installed): pip install 'together-gpu-clusters[twin]'\n"
    )
