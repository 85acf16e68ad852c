"""Refresh and preview a throwaway COPY of a stack, so the real state is never written (``drift``'s shell).

1. ``pulumi stack export`` the real stack (secrets stay encrypted; nothing is decrypted to disk).
2. In a private temporary directory: a file backend, a scratch project holding copies of ``Pulumi.yaml`` and
   the stack's config file (whose ``encryptionsalt`` lets the copy use the same passphrase), ``stack init``
   and ``stack import`` of the export there.
3. ``pulumi refresh`` the copy (it alone is written), ``stack export`` it, then ``pulumi preview --json`` the
   real program against it, with ``--config-file`` pointing at the copied config.
4. The temporary directory is deleted, whatever happened.

The real project's files and the real backend are only read.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .engine import EngineError, Pulumi


@dataclass(frozen=True)
class Observation:
    """Everything ``together_clusters.drift.classify`` needs: the deployed state, the refreshed copy, the preview steps."""

    deployed: dict[str, Any]
    refreshed: dict[str, Any]
    steps: list[dict[str, Any]]


def stack_basename(stack: str) -> str:
    """``org/project/dev`` -> ``dev``: config files are named by the last part."""
    return stack.rsplit("/", 1)[-1]


def project_file(cwd: Path) -> Path:
    for name in ("Pulumi.yaml", "Pulumi.yml"):
        if (cwd / name).is_file():
            return cwd / name
    raise EngineError(f"no Pulumi.yaml in {cwd}: give --cwd the project directory")


def stack_config_file(cwd: Path, stack: str) -> Path | None:
    """The stack's config file, honouring the project's ``stackConfigDir``; ``None`` when it has none."""
    import yaml

    project = yaml.safe_load(project_file(cwd).read_text()) or {}
    folder = cwd / str(project.get("stackConfigDir") or ".")
    for suffix in ("yaml", "yml"):
        candidate = folder / f"Pulumi.{stack_basename(stack)}.{suffix}"
        if candidate.is_file():
            return candidate
    return None


def export_stack(pulumi: Pulumi, stack: str) -> dict[str, Any]:
    """The stack's state as ``pulumi stack export`` prints it (secrets stay encrypted)."""
    exported = pulumi.run_json(["stack", "export", "--stack", stack], what=f" of stack {stack}")
    if not isinstance(exported, dict):
        raise EngineError(f"`pulumi stack export --stack {stack}` returned no deployment")
    return exported


def observe(pulumi: Pulumi, stack: str) -> Observation:
    """Export the real stack, then refresh and preview a copy of it; see the module docstring."""
    cwd = pulumi.cwd.resolve()
    project = project_file(cwd)
    config = stack_config_file(cwd, stack)
    deployed = export_stack(pulumi, stack)
    name = stack_basename(stack)
    on_copy = f" on a copy of stack {stack}"
    with tempfile.TemporaryDirectory(prefix="together-drift-") as tmp:
        root = Path(tmp)
        os.chmod(root, 0o700)
        backend, scratch = root / "backend", root / "project"
        backend.mkdir()
        scratch.mkdir()
        shutil.copyfile(project, scratch / "Pulumi.yaml")
        copy_config = scratch / f"Pulumi.{name}.yaml"
        if config is not None:
            shutil.copyfile(config, copy_config)
        export_file = root / "deployment.json"
        export_file.write_text(json.dumps(deployed))

        # Stack management runs in the scratch project, so only the copied config file can be written.
        copy = pulumi.with_env(PULUMI_BACKEND_URL=backend.as_uri())
        copy.run(["stack", "init", name, "--no-select"], cwd=scratch, what=on_copy)
        copy.run(["stack", "import", "--stack", name, "--file", str(export_file)], cwd=scratch, what=on_copy)
        # The program runs from the real project; --config-file points the engine at the copied config.
        target = ["--stack", name, "--config-file", str(copy_config)]
        copy.run(["refresh", "--yes", "--skip-preview", *target], what=on_copy)
        refreshed = copy.run_json(["stack", "export", "--stack", name], cwd=scratch, what=on_copy)
        preview = copy.run_json(["preview", "--json", *target], what=on_copy)
    steps = list(preview.get("steps") or []) if isinstance(preview, dict) else []
    return Observation(deployed, refreshed, steps)
