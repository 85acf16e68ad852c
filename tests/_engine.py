"""Helpers for tests that drive the real Pulumi engine through ``scripts/pulumi``.

The engine (pulumi CLI, Python language host and shims in ``.engine/bin``, the kubernetes plugin in
``.pulumi-home``) is installed by ``scripts/install-engine``. A test that needs it::

    import pytest
    from tests import _engine

    pytestmark = pytest.mark.engine

    def test_something(tmp_path):
        _engine.require_engine()                  # skip locally, fail with CI=true, when not installed
        project = _engine.write_project(tmp_path / "prog", "my-test", PROGRAM_SOURCE)
        env = _engine.engine_env(tmp_path)        # state in tmp_path/.pulumi-state, own passphrase
        _engine.run_pulumi(["stack", "init", "test"], cwd=project, env=env, check=True)
        proc = _engine.run_pulumi(["up", *_engine.UP_FLAGS], cwd=project, env=env)
        assert proc.returncode == 0, _engine.output(proc)
        ...
        _engine.run_pulumi(["destroy", *_engine.UP_FLAGS], cwd=project, env=env, check=True)

Notes for test authors (each learnt the hard way):

* Dynamic providers are pickled (dill) into the state. A provider class defined in an importable module
  is stored by reference (``module.Class``): that module must be importable, under the same name, both in
  the program and in the dynamic provider process that the engine starts later (``pulumi-resource-pulumi-
  python``, run with the project's ``.venv``). Put the repository root (or wherever the module lives) in
  ``engine_env(..., pythonpath=[...])``: ``PYTHONPATH`` reaches both processes. Packages installed in
  ``.venv`` (``provider``, ``components``, ``emulator``) need nothing. Never keep clients, tokens or locks
  on the provider object: instance attributes are pickled by value.
* The serialized provider is a secret, so every operation on a stack needs the passphrase it was created
  with: ``engine_env`` sets ``PULUMI_CONFIG_PASSPHRASE`` (``DEFAULT_PASSPHRASE`` unless given).
* ``preview --expect-no-changes`` exits ``EXIT_CHANGES_PROPOSED`` (7) when changes are proposed and 1 (or
  another code) on errors: assert on the exact code.
* ``engine_env`` removes ``KUBECONFIG``: kubernetes resources must use an explicit ``k8s.Provider``
  (``render_yaml_to_directory=...`` or a kubeconfig from the test).
* Nothing is downloaded: ``PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true`` turns a missing plugin into
  an error. The kubernetes plugin is installed at exactly the pulumi-kubernetes version pinned in
  pyproject.toml.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

from together_clusters.components.controllers.releases import CHART_SOURCE_ENV
from together_clusters.emulator.kubernetes import binaries

ROOT = Path(__file__).resolve().parents[1]
PULUMI = ROOT / "scripts" / "pulumi"
INSTALL_ENGINE = ROOT / "scripts" / "install-engine"
VENV = ROOT / ".venv"
EXAMPLES = ROOT / "examples"
PULUMI_HOME = ROOT / ".pulumi-home"

#: Passphrase of throwaway local stacks (the same default as scripts/pulumi).
DEFAULT_PASSPHRASE = "local-only-passphrase"
# gocloud's fileblob writes each checkpoint atomically but its sidecar <file>.attrs in place (truncate, then
# write): a kill in between leaves it empty and the stack unreadable ("failed to load checkpoint: EOF").
# Pulumi never reads the sidecar, so write none. scripts/pulumi sets the same for its default backend.
LOCAL_BACKEND_QUERY = "?metadata=skip"
#: Exit code of ``pulumi preview/up/refresh --expect-no-changes`` when changes were proposed.
EXIT_CHANGES_PROPOSED = 7
#: Flags for a non-interactive ``up``/``destroy``/``refresh``.
UP_FLAGS = ("--yes", "--non-interactive", "--skip-preview", "--color", "never")
#: Flags for a non-interactive ``preview``.
PREVIEW_FLAGS = ("--non-interactive", "--color", "never")

# How long an interrupted pulumi gets to cancel and unlock its stack before it is killed.
_INTERRUPT_WAIT_S = 30
_installed: bool | None = None


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def engine_installed() -> bool:
    """Whether scripts/install-engine has installed an engine that is current (cached per session)."""
    global _installed
    if _installed is None:
        proc = subprocess.run(
            [str(INSTALL_ENGINE), "--check"], capture_output=True, text=True, timeout=120, check=False
        )
        _installed = proc.returncode == 0
    return _installed


def require_engine() -> None:
    """Skip the calling test when the engine is missing; with CI=true, fail it instead.

    A test that needs the engine must never pass silently without it in CI.
    """
    if engine_installed():
        return
    message = f"the Pulumi engine is not installed or out of date: run {INSTALL_ENGINE.relative_to(ROOT)}"
    if in_ci():
        pytest.fail(f"{message} (CI=true: engine tests may not be skipped)", pytrace=False)
    pytest.skip(message)


def engine_env(
    workdir: os.PathLike[str] | str,
    *,
    passphrase: str | None = None,
    pythonpath: Iterable[os.PathLike[str] | str] = (),
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Environment for running the engine on a throwaway stack whose state lives under ``workdir``.

    - ``PULUMI_BACKEND_URL=file://<workdir>/.pulumi-state?metadata=skip`` (created), never the project's own
      state; ``metadata=skip``: no sidecar ``.attrs`` file, which a SIGKILL can leave empty and which then
      breaks every command on the stack (tests/engine/test_state_backend.py);
    - ``PULUMI_HOME`` = the project's ``.pulumi-home`` (installed plugins), offline switches on;
    - ``PULUMI_CONFIG_PASSPHRASE`` = ``passphrase`` or ``DEFAULT_PASSPHRASE`` (any passphrase file unset);
    - ``PULUMI_RUNTIME_VIRTUALENV`` = the project's ``.venv`` (used when Pulumi.yaml names no virtualenv);
    - ``PYTHONPATH`` = ``pythonpath`` entries (absolute) before any inherited value: this is how a dynamic
      provider module that is not installed in .venv becomes importable by the program and by the dynamic
      provider process;
    - ``TOGETHER_CHART_SOURCE`` = the twin's charts folder (the machine is offline: no registry);
    - ``KUBECONFIG`` removed; ``extra`` applied last.
    """
    state = Path(workdir).resolve() / ".pulumi-state"
    state.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    for name in ("KUBECONFIG", "PULUMI_CONFIG_PASSPHRASE_FILE", "PULUMI_ACCESS_TOKEN", "PULUMI_STACK"):
        env.pop(name, None)
    env.update(
        {
            "PULUMI_HOME": str(PULUMI_HOME),
            "PULUMI_BACKEND_URL": state.as_uri() + LOCAL_BACKEND_QUERY,
            "PULUMI_CONFIG_PASSPHRASE": DEFAULT_PASSPHRASE if passphrase is None else passphrase,
            "PULUMI_RUNTIME_VIRTUALENV": str(VENV),
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_SKIP_CONFIRMATIONS": "true",
            "PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK": "true",
            # Offline: ClusterControllers installs the pinned charts install-kubernetes copied from their modules.
            CHART_SOURCE_ENV: str(binaries.charts_dir()),
        }
    )
    paths = [str(Path(p).resolve()) for p in pythonpath]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    if extra:
        env.update(extra)
    return env


class PulumiCommandError(AssertionError):
    """A ``run_pulumi(..., check=True)`` call exited non-zero, or any ``run_pulumi`` call ran past its timeout."""


def output(proc: subprocess.CompletedProcess[str]) -> str:
    """The command line, exit code and captured output of a run, for assertion messages."""
    args = " ".join(str(a) for a in proc.args)
    return f"$ {args}\n[exit {proc.returncode}]\n--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}"


def run_pulumi(
    args: Sequence[str],
    cwd: os.PathLike[str] | str,
    env: Mapping[str, str] | None = None,
    *,
    check: bool = False,
    timeout: float = 600,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``scripts/pulumi ARGS`` in ``cwd`` and return the CompletedProcess (stdout/stderr captured).

    ``env`` defaults to ``engine_env(cwd)``. With ``check=True`` a non-zero exit raises
    ``PulumiCommandError`` carrying the whole output.
    """
    command = [str(PULUMI), *args]
    run_env = dict(env) if env is not None else engine_env(cwd)
    with subprocess.Popen(
        command,
        cwd=str(cwd),
        env=run_env,
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as running:
        try:
            stdout, stderr = running.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            stdout, stderr = _interrupt(running, cwd, run_env)
            timed_out = subprocess.CompletedProcess(command, running.returncode, stdout, stderr)
            raise PulumiCommandError(f"timed out after {timeout:g}s\n{output(timed_out)}") from None
    proc = subprocess.CompletedProcess(command, running.returncode, stdout, stderr)
    if check and proc.returncode != 0:
        raise PulumiCommandError(output(proc))
    return proc


@contextmanager
def up_killed_on_exit(cwd: os.PathLike[str] | str, env: Mapping[str, str]) -> Iterator[subprocess.Popen[str]]:
    """``pulumi up`` running in ``cwd`` while the block runs; SIGKILLed with its plugins (its process group,
    as a cancelled CI job is) when the block ends, then ``pulumi cancel`` frees the stack it left locked."""
    with subprocess.Popen(
        [str(PULUMI), "up", *UP_FLAGS],
        cwd=str(cwd),
        env=dict(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    ) as running:
        try:
            yield running
        finally:
            kill_tree(running.pid)
            running.wait()
    run_pulumi(["cancel", "--yes"], cwd=cwd, env=env, check=True)


def _children(pid: int) -> set[int]:
    """The processes whose parent is ``pid`` (read from /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.add(int(entry.name))
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and every process it started, as a cancelled CI job is killed. Its process group is not
    enough: the engine starts its plugins (language host, providers) in process groups of their own (its
    cmdutil.RegisterProcessGroup), and a plugin left running after its engine was killed holds on (and keeps
    writing). Each process is stopped first, so none starts another while the tree is walked."""
    tree: set[int] = set()
    new = {pid}
    while new:
        for each in new:
            with suppress(ProcessLookupError):
                os.kill(each, signal.SIGSTOP)
        tree |= new
        new = set().union(*(_children(each) for each in new)) - tree
    with suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    for each in tree:
        with suppress(ProcessLookupError):
            os.kill(each, signal.SIGKILL)


def pulumi_in(
    cwd: os.PathLike[str] | str, env: Mapping[str, str]
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``run_pulumi`` bound to one project and environment: ``pulumi("up", *UP_FLAGS, check=False)``.

    ``check`` defaults to True: a failed setup step (``stack init``, ``config set``) stops the test there.
    """

    def pulumi(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run_pulumi(list(args), cwd=cwd, env=env, check=check)

    return pulumi


class ProjectStack:
    """Base of a test's stack: a project in ``dir`` run with ``env``; a subclass writes both and inits the stack."""

    dir: Path
    env: dict[str, str]

    def run(self, *args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
        """``pulumi ARGS`` on this stack; with ``check``, a non-zero exit raises ``PulumiCommandError``."""
        return run_pulumi(list(args), cwd=self.dir, env=self.env, check=check)

    def config(self, key: str, value: object) -> None:
        """``pulumi config set KEY VALUE``."""
        self.run("config", "set", key, str(value), check=True)

    def outputs(self) -> dict[str, Any]:
        """The stack's outputs, secrets shown."""
        return stack_outputs(self.dir, self.env)


def _interrupt(
    running: subprocess.Popen[str], cwd: os.PathLike[str] | str, env: dict[str, str]
) -> tuple[str, str]:
    """End a ``pulumi`` that ran too long as Ctrl-C does, so it releases the stack's lock: killed, it would
    leave the stack locked and fail every later test of the same stack. Its output so far."""
    running.send_signal(signal.SIGINT)
    try:
        return running.communicate(timeout=_INTERRUPT_WAIT_S)
    except subprocess.TimeoutExpired:
        running.kill()
        stdout, stderr = running.communicate()
        subprocess.run(
            [str(PULUMI), "cancel", "--yes"],
            cwd=str(cwd),
            env=env,
            capture_output=True,
            timeout=60,
            check=False,
        )
        return stdout, stderr


def write_project(
    directory: os.PathLike[str] | str,
    name: str,
    program: str,
    *,
    virtualenv: os.PathLike[str] | str = VENV,
) -> Path:
    """Write a Python Pulumi project (``Pulumi.yaml`` + ``__main__.py``) and return its directory.

    The runtime uses the project's ``.venv`` (absolute path) with the pip toolchain.
    """
    project = Path(directory)
    project.mkdir(parents=True, exist_ok=True)
    (project / "Pulumi.yaml").write_text(
        f"name: {name}\n"
        "runtime:\n"
        "  name: python\n"
        "  options:\n"
        "    toolchain: pip\n"
        f"    virtualenv: {json.dumps(str(Path(virtualenv).resolve()))}\n"
    )
    (project / "__main__.py").write_text(program)
    return project


def write_yaml_project(directory: os.PathLike[str] | str, name: str, body: str = "") -> Path:
    """Write a YAML Pulumi project ``name`` (its resources, config and outputs in ``body``) whose ``Pulumi.yaml``
    takes the plugin ``together`` from this checkout, and return its directory (made)."""
    from together_clusters.provider import native  # the plugin's launcher sits beside its module

    plugin = Path(native.__file__).resolve().parent / "plugin"
    project = Path(directory)
    project.mkdir(parents=True, exist_ok=True)
    head = (
        f"name: {name}\nruntime: yaml\nplugins:\n  providers:\n    - name: together\n"
        f"      path: {json.dumps(str(plugin))}\n"
    )
    (project / "Pulumi.yaml").write_text(head + body)
    return project


def copy_example(example: str, directory: os.PathLike[str] | str) -> Path:
    """A copy of the project ``examples/<example>`` in ``directory`` (the folder is made), runnable from there:
    its ``Pulumi.yaml``'s virtualenv, relative to the repository, made absolute."""
    project = Path(directory)
    shutil.copytree(EXAMPLES / example, project)
    pulumi_yaml = project / "Pulumi.yaml"
    pulumi_yaml.write_text(
        pulumi_yaml.read_text().replace("virtualenv: ../../.venv", f"virtualenv: {json.dumps(str(VENV))}")
    )
    return project


def stack_export(cwd: os.PathLike[str] | str, env: Mapping[str, str]) -> dict[str, Any]:
    """The current stack's deployment (``pulumi stack export``) as a dict."""
    proc = run_pulumi(["stack", "export"], cwd=cwd, env=env, check=True)
    return json.loads(proc.stdout)


def stack_resources(cwd: os.PathLike[str] | str, env: Mapping[str, str]) -> list[dict[str, Any]]:
    """The resources in the current stack's state (may be empty)."""
    return list(stack_export(cwd, env).get("deployment", {}).get("resources") or [])


def stack_outputs(cwd: os.PathLike[str] | str, env: Mapping[str, str]) -> dict[str, Any]:
    """The current stack's outputs, secrets shown in clear."""
    proc = run_pulumi(["stack", "output", "--json", "--show-secrets"], cwd=cwd, env=env, check=True)
    return json.loads(proc.stdout)
