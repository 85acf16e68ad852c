"""together-clusters: drift detection, capacity status and preemption drills for stacks of Together GPU
clusters.

    together-clusters drift  [-s NAME ...| --all-stacks] [-C DIR] [--fail-on-pending] [--fail-on-stalled]
                             [--json] [--junit FILE] [--markdown FILE] [--jobs N]
    together-clusters status [-s NAME] [-C DIR] [--price-per-gpu-hour P] [--png FILE] [--json]
                             [--fail-on-stalled]
    together-clusters drill  [--kubeconfig FILE] [--context NAME] [-n NAMESPACE] [--node NAME]
                             [--twin URL [--termination MODE]] [--dry-run] [--yes] [--json]

Without -s/--stack, drift and status use the selected stack, as pulumi does.
drift exit codes (the worst over all stacks): 1 error (a stack could not be checked), 2 drift found,
3 changes pending (only with --fail-on-pending), 4 a workload stalled for capacity (only with
--fail-on-stalled), 0 in sync. status: 0 shown, 4 a workload stalled (only with --fail-on-stalled), 1 error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from together_clusters.errors import MissingExtraError
from together_clusters.provider.errors import TogetherError

from . import drift_command, drill_command, status_command
from .arguments import Parser, add_version
from .classify import EXIT_ERROR
from .workspace import EngineError


def build_parser() -> argparse.ArgumentParser:
    """The top parser: one subcommand per command module."""
    parser = Parser(
        prog="together-clusters", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_version(parser)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    drift_command.add_parser(sub)
    status_command.add_parser(sub)
    drill_command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The ``together-clusters`` entry point: parse, run the command, return its exit code."""
    args = build_parser().parse_args(argv)
    if args.command == "drill":
        # The drill reports its own errors (the Kubernetes client's, the twin's HTTP).
        return drill_command.run(args)
    run = drift_command.run if args.command == "drift" else status_command.run
    try:
        return run(args)
    except (EngineError, TogetherError, OSError) as exc:
        message = " ".join(str(exc).split())
        if isinstance(exc, TogetherError) and not isinstance(exc, EngineError | MissingExtraError):
            message = f"the Together API failed: {message}"
        print(f"together-clusters {args.command}: error: {message}", file=sys.stderr)
        if args.json:
            print(json.dumps({"exit_code": EXIT_ERROR, "error": message}, indent=2))
        return EXIT_ERROR
