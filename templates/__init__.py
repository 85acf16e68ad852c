"""``pulumi new`` templates shipped with the package: ``cluster``, ``finetune`` and ``sweep``.

Each is a folder that follows Pulumi's template conventions (``Pulumi.yaml`` with a ``template`` section
whose config prompts have descriptions and defaults), usable offline from its local path::

    pulumi new "$(python -m together_clusters.templates finetune)"

``python -m together_clusters.templates`` lists them. The folder it prints is a clean copy of the template
(``pulumi new`` copies every file of a folder it is given, and an installed package's folder also holds
the ``__pycache__/`` that pip or a run compiled there). The copy also carries, in ``pulumi-plugin/``, the
launcher of the package's dynamic-provider host (:data:`together_clusters.provider.host.PLUGIN_DIR`), which
each template's ``Pulumi.yaml`` names under ``plugins.providers``: a path inside the project, so it does not
depend on where, or under which Python version, the package is installed.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

from together_clusters.provider.host import PLUGIN_DIR

DIRECTORY = Path(__file__).resolve().parent
BUILD_LITTER = ("__pycache__", "*.pyc", "*.pyo")
"""What a run or an install leaves in a template's folder and a new project must not get."""
PLUGIN_FOLDER = "pulumi-plugin"
"""The folder of a template's copy (and of the project made from it) holding the host's launcher. Neither the
repository nor the wheel holds one inside a template (the launcher's one home is ``provider/plugin/``): give
``pulumi new`` the folder that ``python -m together_clusters.templates NAME`` prints, in a checkout too."""


def names() -> list[str]:
    """The names of the templates, sorted."""
    return sorted(p.name for p in DIRECTORY.iterdir() if (p / "Pulumi.yaml").is_file())


def path(name: str) -> Path:
    """The folder of template ``name`` as installed; :func:`clean_copy` is the one to give to ``pulumi new``."""
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
    shutil.copytree(source, fresh, ignore=shutil.ignore_patterns(*BUILD_LITTER, PLUGIN_FOLDER))
    _add_plugin(fresh / PLUGIN_FOLDER)
    shutil.rmtree(target, ignore_errors=True)
    fresh.rename(target)
    fresh.parent.rmdir()
    return target


def _add_plugin(folder: Path) -> None:
    """The host's launcher, copied from the installed package (its one home) and executable for the engine."""
    shutil.copytree(PLUGIN_DIR, folder, ignore=shutil.ignore_patterns(*BUILD_LITTER))
    executable = stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH
    for launcher in folder.iterdir():
        launcher.chmod(launcher.stat().st_mode | executable)
