"""Run the ``pulumi`` CLI as a subprocess and turn its failures into one readable error."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Never wait on a prompt, never colour the output we parse, never reach for an update or a plugin.
_QUIET_ENV = {
    "PULUMI_SKIP_UPDATE_CHECK": "true",
    "PULUMI_SKIP_CONFIRMATIONS": "true",
}
_COMMON_FLAGS = ("--non-interactive", "--color", "never")
DEFAULT_TIMEOUT_S = 30 * 60


class EngineError(RuntimeError):
    """A pulumi command failed; the message says which and why."""


# A Python exception's last traceback line ("together_clusters.provider.errors.TransportError: GET ... failed"): the cause.
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Failure|Timeout)\w*: .+")
_ERROR_LINE = re.compile(r"\berror: (\S.*)")
# Engine lines that only say that something failed, not what.
_NOISE = ("traceback (most recent call last)", "update failed", "resource monitor has terminated", "errored")


def failure_summary(stdout: str, stderr: str, limit: int = 6) -> str:
    """The lines that explain a failed pulumi run. Pure.

    The causes (exception lines raised by a provider) come first, then the engine's own ``error:``
    lines, then, if there are neither, the tail of the output.
    """
    lines = [ln.strip() for ln in (stderr + "\n" + stdout).splitlines() if ln.strip()]
    causes: list[str] = []
    errors: list[str] = []
    for line in lines:
        if _EXCEPTION_LINE.match(line):
            if line not in causes:
                causes.append(line)
            continue
        found = _ERROR_LINE.search(line)
        if found is None or any(n in line.lower() for n in _NOISE):
            continue
        message = "error: " + found.group(1).strip()
        if message not in errors:
            errors.append(message)
    picked = causes + [e for e in errors if not any(c in e for c in causes)]
    return "\n".join(f"  {ln}" for ln in (picked or lines[-limit:])[:limit]) or "  (no output)"


def find_pulumi(explicit: str | None = None) -> str:
    """The pulumi executable: ``explicit`` if given, else ``pulumi`` on PATH."""
    found = explicit or shutil.which("pulumi")
    if not found:
        raise EngineError("the pulumi CLI was not found on PATH (or give --pulumi PATH)")
    return found


@dataclass
class Pulumi:
    """One pulumi CLI in one project directory with one environment."""

    binary: str
    cwd: Path
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    timeout_s: float = DEFAULT_TIMEOUT_S

    def with_env(self, **overrides: str) -> Pulumi:
        return Pulumi(self.binary, self.cwd, {**self.env, **overrides}, self.timeout_s)

    def run(
        self, args: Sequence[str], *, cwd: Path | None = None, ok: Sequence[int] = (0,), what: str = ""
    ) -> str:
        """Run ``pulumi ARGS``; its stdout, or ``EngineError`` on an exit code not in ``ok``.

        ``what`` says in the error what the command was run on (e.g. " on a copy of stack dev").
        """
        command = [self.binary, *args, *_COMMON_FLAGS]
        try:
            proc = subprocess.run(
                command,
                cwd=str(cwd or self.cwd),
                env={**self.env, **_QUIET_ENV},
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise EngineError(
                f"`pulumi {_describe(args)}`{what} did not finish in {self.timeout_s:g}s"
            ) from None
        except OSError as exc:
            raise EngineError(f"cannot run {self.binary}: {exc}") from None
        if proc.returncode not in ok:
            raise EngineError(
                f"`pulumi {_describe(args)}`{what} failed (exit {proc.returncode}):\n"
                + failure_summary(proc.stdout, proc.stderr)
            )
        return proc.stdout

    def run_json(self, args: Sequence[str], *, cwd: Path | None = None, what: str = "") -> Any:
        out = self.run(args, cwd=cwd, what=what)
        try:
            return json.loads(out)
        except json.JSONDecodeError as exc:
            raise EngineError(f"`pulumi {_describe(args)}` printed no JSON ({exc}): {out[:300]!r}") from None


def _describe(args: Sequence[str]) -> str:
    """The subcommand alone (``stack export``, ``refresh``): flags carry temporary paths, noise here."""
    words = []
    for arg in args:
        if arg.startswith("-"):
            break
        words.append(arg)
    return " ".join(words[:2])


def env_without(env: Mapping[str, str], *names: str) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in names}
