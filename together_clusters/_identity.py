"""One import identity: each subpackage is ``together_clusters.<name>``, never a package of its own.

From the repository root (the current directory, or a ``PYTHONPATH`` naming it) the top-level folders
``provider/``, ``components/``, ``emulator/``, ``drift/`` and ``templates/`` are importable as ``provider``,
``components``, and so on. Such an import would load a second copy of the subpackage, with its own module
state (the settings' client cache) and another class path for the provider the engine pickles into the
state, which breaks the stability promise of ``provider/resource.py``. Each of those packages' ``__init__``
calls :func:`refuse` when its ``__name__`` is not under ``together_clusters.``, before it imports anything.

Standard library only: it runs before anything of the second copy is loaded.
"""

from __future__ import annotations

import sys
from typing import NoReturn


def refuse(name: str) -> NoReturn:
    """Fail the import of subpackage folder ``name`` under a name of its own, saying what to write instead."""
    subpackage = name.rpartition(".")[2]
    module = _module_being_run()
    if module is not None and (module == name or module.startswith(f"{name}.")):
        fix = f"run python -m together_clusters.{subpackage}{module.removeprefix(name)} instead"
    else:
        fix = f"import together_clusters.{subpackage} instead"
    # name=: runpy then reports the failure of `python -m` as one line, without a traceback.
    raise ImportError(
        f"{name!r} is the folder of the together_clusters.{subpackage} package: {fix}", name=name
    )


def _module_being_run() -> str | None:
    """The MODULE of ``python -m MODULE`` while Python imports its packages (``sys.argv[0]`` is ``-m`` then)."""
    if sys.argv[:1] != ["-m"]:
        return None
    # The arguments after MODULE are sys.argv[1:]; the word before them holds MODULE (`-m MODULE`, `-mMODULE`).
    word = sys.orig_argv[len(sys.orig_argv) - len(sys.argv)]
    return word.partition("m")[2] if word.startswith("-") else word
