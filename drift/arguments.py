"""The argument conventions the three commands share: bad arguments exit 1, the project options, number types."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn

from .classify import EXIT_ERROR


class Parser(argparse.ArgumentParser):
    """Bad arguments exit 1 like any other error (argparse's own code, 2, means drift here)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message}\n")


def add_project_options(p: argparse.ArgumentParser) -> None:
    """``--cwd``, ``--json`` and ``--pulumi``: where the Pulumi project is, and how to print."""
    p.add_argument("--cwd", type=Path, default=Path.cwd(), help="the Pulumi project directory (default: .)")
    p.add_argument("--json", action="store_true", help="print JSON for machines instead of tables")
    p.add_argument(
        "--pulumi", type=Path, default=None, help="the pulumi executable, in a bin folder (default: PATH)"
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
