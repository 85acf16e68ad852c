"""The Pulumi engine, through ``pulumi.automation``: a workspace over the user's own project directory.

The stack is used where it lives, with whatever backend and secrets provider it has: the CLI finds both
from the environment and the project exactly as the user's own ``pulumi`` does. Nothing is written: no
``pulumi stack select`` either (see :class:`StackInPlace`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pulumi import automation as auto

from together_clusters.errors import EngineError

from .failure import cause_line


@dataclass(frozen=True)
class EngineSettings:
    """Where the project is and which ``pulumi`` runs it (the environment is the process's own)."""

    project_dir: Path
    #: The ``pulumi`` executable; ``None``: the one on PATH.
    pulumi: Path | None = None


class StackInPlace(auto.Stack):
    """An existing stack, addressed by name on every command (``--stack``), never selected.

    ``auto.Stack.select`` runs ``pulumi stack select``, which changes the user's current stack in their
    Pulumi home: a drift check must leave that as it found it, and checks of several stacks of one project
    run at once. A stack that does not exist fails the first command run on it.
    """

    def __init__(self, name: str, workspace: auto.LocalWorkspace) -> None:
        self.name = name
        self.workspace = workspace

    def __repr__(self) -> str:
        return f"StackInPlace({self.name!r}, work_dir={self.workspace.work_dir!r})"


def pulumi_command(executable: Path | None) -> auto.PulumiCommand:
    """The Automation API's handle on the CLI; its own ``bin`` folder goes first on PATH (plugins, hosts)."""
    root = None
    if executable is not None:
        resolved = executable.resolve()
        if resolved.parent.name != "bin" or resolved.name != "pulumi":
            raise EngineError(
                f"--pulumi {executable}: give the path of a pulumi executable inside a bin folder"
            )
        root = str(resolved.parent.parent)
    try:
        return auto.PulumiCommand(root=root, skip_version_check=True)
    except (OSError, auto.CommandError) as exc:
        where = executable or "PATH"
        raise EngineError(f"cannot run the pulumi CLI from {where}: {cause_line(str(exc))}") from None


def open_workspace(settings: EngineSettings) -> auto.LocalWorkspace:
    """A workspace over the project directory as it is (it must hold the Pulumi.yaml)."""
    project = settings.project_dir.resolve()
    if not any((project / name).is_file() for name in ("Pulumi.yaml", "Pulumi.yml", "Pulumi.json")):
        raise EngineError(f"no Pulumi.yaml in {project}: give --cwd the project directory")
    return auto.LocalWorkspace(
        work_dir=str(project),
        pulumi_command=pulumi_command(settings.pulumi),
        env_vars={"PULUMI_SKIP_UPDATE_CHECK": "true"},
    )


def stack_names(workspace: auto.LocalWorkspace) -> list[str]:
    """Every stack of the project in its backend."""
    return sorted(
        s.name for s in engine_call(f"listing the stacks of {workspace.work_dir}", workspace.list_stacks)
    )


def selected_stack(workspace: auto.LocalWorkspace) -> str:
    """The workspace's current stack, the one ``pulumi`` acts on without ``--stack``."""
    current = engine_call(f"reading the selected stack of {workspace.work_dir}", workspace.stack)
    if current is None:
        raise EngineError(
            f"no stack is selected in {workspace.work_dir}: give -s/--stack NAME, or run pulumi stack select NAME"
        )
    return current.name


T = TypeVar("T")


def engine_call(what: str, call: Callable[[], T], diagnostics: Sequence[str] = ()) -> T:
    """Run ``call``; a failure becomes an :class:`EngineError` whose message is the cause in one line.

    ``diagnostics``: the engine's error messages, collected while ``call`` runs; read first (as error lines:
    the events carry them without the ``error:`` the engine prints before them).
    """
    try:
        return call()
    except auto.CommandError as exc:
        errors = [f"error: {d}" for d in diagnostics]
        raise EngineError(f"{what} failed: {cause_line(*errors, str(exc))}") from None


def export(stack: auto.Stack) -> dict[str, Any]:
    """The stack's state as it is now (``pulumi stack export``; ``stack_state`` reads it)."""
    deployment = engine_call(f"exporting stack {stack.name}", stack.export_stack)
    return {"version": deployment.version, "deployment": deployment.deployment or {}}
