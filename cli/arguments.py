"""The argument conventions the commands share: bad arguments exit 1 on one line, the project options
as ``pulumi`` spells them, the Kubernetes options as ``kubectl`` spells them, number types."""

from __future__ import annotations

import argparse
import sys
from importlib import metadata
from pathlib import Path
from typing import NoReturn

from .exit_codes import ExitCode

DISTRIBUTION = "together-gpu-clusters"


class Parser(argparse.ArgumentParser):
    """Bad arguments exit ``ERROR`` (1) like any other error (argparse's own code, 2, means drift here), on
    one line."""

    def error(self, message: str) -> NoReturn:
        self.exit(ExitCode.ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def version() -> str:
    """The installed distribution's version (a checkout that was never installed says so)."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def add_version(p: argparse.ArgumentParser) -> None:
    """``--version``: the program's name and the distribution's version."""
    p.add_argument("--version", action="version", version=f"%(prog)s {version()}")


def add_stack_option(p: argparse._ActionsContainer, many: bool = False) -> argparse.Action:
    """``-s/--stack NAME`` as ``pulumi`` has it: default the workspace's selected stack (``pulumi stack
    select``). ``many``: repeatable, for a check of several stacks."""
    if many:
        return p.add_argument(
            "-s",
            "--stack",
            action="append",
            dest="stacks",
            metavar="NAME",
            default=None,
            help="a stack to check (repeat for several; default: the selected stack, as pulumi picks it)",
        )
    return p.add_argument(
        "-s",
        "--stack",
        metavar="NAME",
        default=None,
        help="the stack (default: the selected stack, as pulumi picks it)",
    )


def add_project_options(p: argparse.ArgumentParser) -> None:
    """``--cwd``, ``--json`` and ``--pulumi``: where the Pulumi project is, and how to print."""
    p.add_argument(
        "-C",
        "--cwd",
        type=Path,
        default=Path.cwd(),
        metavar="DIR",
        help="run as if started in DIR, the Pulumi project directory (default: .)",
    )
    p.add_argument("--json", action="store_true", help="print JSON for machines instead of tables")
    p.add_argument(
        "--pulumi", type=Path, default=None, help="the pulumi executable, in a bin folder (default: PATH)"
    )


def add_fail_on_stalled(p: argparse.ArgumentParser) -> None:
    """``--fail-on-stalled``, the same on ``status`` and ``drift``."""
    p.add_argument(
        "--fail-on-stalled",
        action="store_true",
        help=f"exit {ExitCode.STALLED:d} when a workload is stalled for capacity (pods the scheduler cannot place, "
        "or a Kueue Workload not admitted); without it they are reported only, as information",
    )


def non_negative(text: str) -> float:
    """An argparse type: a float >= 0."""
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0; got {text}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: an int >= 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1; got {text}")
    return value


def print_error(command: str, message: str) -> None:
    """A command's error, on one line of stderr."""
    print(f"together-clusters {command}: error: {' '.join(message.split())}", file=sys.stderr)
