"""Optional extras: the ImportError of a missing one becomes a :class:`MissingExtraError` naming the fix.

The extras and what they install are declared in ``pyproject.toml`` (and ``runtime/pyproject.toml`` for
the checkpoint runtime's ``s3``); this module knows only which top-level modules each one brings, to tell
a missing extra from any other import failure (a broken install is re-raised as it is). Standard library
only: the in-container checkpoint runtime uses it too.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata

from together_clusters.errors import MissingExtraError

MAIN_DISTRIBUTION = "together-gpu-clusters"
RUNTIME_DISTRIBUTION = "together-gpu-checkpoint"
"""The checkpoint runtime alone (``runtime/``), for training images."""

MODULES: dict[str, frozenset[str]] = {
    "emulator": frozenset({"fastapi", "starlette", "uvicorn"}),
    "twin": frozenset({"kubernetes", "cryptography"}),
    "drill": frozenset({"kubernetes"}),
    "remediations": frozenset({"kubernetes"}),
    "plot": frozenset({"matplotlib"}),
    "s3": frozenset({"boto3", "botocore", "s3transfer"}),
}
"""The top-level modules each extra installs, by extra name (the names of pyproject.toml's extras)."""


@contextmanager
def requires_extra(extra: str, feature: str) -> Iterator[None]:
    """Run the imports of ``feature`` inside this block; a module of ``extra`` missing raises
    :class:`MissingExtraError` (from the ImportError), whose message ends in the ``pip install`` to run::

        with requires_extra("plot", "the status chart (--png)"):
            import matplotlib
    """
    modules = MODULES[extra]
    try:
        yield
    except ModuleNotFoundError as error:
        top = (error.name or "").partition(".")[0]  # "kubernetes" of "kubernetes.client": the one to install
        if top not in modules:
            raise
        raise MissingExtraError(feature, extra, installed_distribution(extra), top) from error


def installed_distribution(extra: str) -> str:
    """The installed distribution that declares ``extra``: the main package, else the checkpoint runtime
    (a training image), else the main package's name (a source checkout)."""
    for name in (MAIN_DISTRIBUTION, RUNTIME_DISTRIBUTION):
        try:
            declared = metadata.metadata(name).get_all("Provides-Extra") or []
        except metadata.PackageNotFoundError:
            continue
        if extra in declared:
            return name
    return MAIN_DISTRIBUTION
