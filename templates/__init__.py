"""``pulumi new`` templates shipped with the package: ``cluster``, ``finetune`` and ``sweep``.

Each is a folder that follows Pulumi's template conventions (``Pulumi.yaml`` with a ``template`` section
whose config prompts have descriptions and defaults), usable offline from its local path::

    pulumi new "$(python -m together_clusters.templates finetune)"

``python -m together_clusters.templates`` lists them.
"""

from __future__ import annotations

if not __name__.startswith("together_clusters."):  # a second copy: see together_clusters/_identity.py
    from together_clusters._identity import refuse

    refuse(__name__)

from pathlib import Path

DIRECTORY = Path(__file__).resolve().parent


def names() -> list[str]:
    """The names of the templates, sorted."""
    return sorted(p.name for p in DIRECTORY.iterdir() if (p / "Pulumi.yaml").is_file())


def path(name: str) -> Path:
    """The folder of template ``name``, to give to ``pulumi new``."""
    folder = DIRECTORY / name
    if not (folder / "Pulumi.yaml").is_file():
        raise ValueError(f"no template named {name!r}; the templates are: {', '.join(names())}")
    return folder
