"""``pulumi new`` templates shipped with the package: ``cluster``, ``finetune`` and ``sweep``.

Each is a folder that follows Pulumi's template conventions (``Pulumi.yaml`` with a ``template`` section
whose config prompts have descriptions and defaults), usable offline from its local path::

    pulumi new "$(python -m together_clusters.templates finetune)"

``python -m together_clusters.templates`` lists them. The folder it prints is a clean copy of the template
(``pulumi new`` copies every file of a folder it is given, and an installed package's folder also holds
the ``__pycache__/`` that pip or a run compiled there).
"""

from __future__ import annotations

if not __name__.startswith("together_clusters."):  # a second copy: see together_clusters/_identity.py
    from together_clusters._identity import refuse

    refuse(__name__)

import os
import shutil
import tempfile
from pathlib import Path

DIRECTORY = Path(__file__).resolve().parent
BUILD_LITTER = ("__pycache__", "*.pyc", "*.pyo")
"""What a run or an install leaves in a template's folder and a new project must not get."""


def names() -> list[str]:
    """The names of the templates, sorted."""
    return sorted(p.name for p in DIRECTORY.iterdir() if (p / "Pulumi.yaml").is_file())


def path(name: str) -> Path:
    """The folder of template ``name``, to give to ``pulumi new``."""
    folder = DIRECTORY / name
    if not (folder / "Pulumi.yaml").is_file():
        raise ValueError(f"no template named {name!r}; the templates are: {', '.join(names())}")
    return folder


def copies_directory() -> Path:
    """Where clean copies go: the user's cache (``$XDG_CACHE_HOME``, else ``~/.cache``)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "together-clusters" / "templates"


def clean_copy(name: str) -> Path:
    """A copy of template ``name`` without build litter, made afresh, for ``pulumi new`` to copy from."""
    source = path(name)
    root = copies_directory()
    root.mkdir(parents=True, exist_ok=True)
    target = root / name
    # Made beside the target and renamed into place, so a copy being made is never the one printed.
    fresh = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root)) / name
    shutil.copytree(source, fresh, ignore=shutil.ignore_patterns(*BUILD_LITTER))
    shutil.rmtree(target, ignore_errors=True)
    fresh.rename(target)
    fresh.parent.rmdir()
    return target
