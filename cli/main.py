"""together-clusters: drift detection, capacity status, preemption and repair drills, and the remediation gate
for stacks of Together GPU clusters.

    together-clusters drift  [-s NAME ...| --all-stacks] [-C DIR] [--fail-on-pending] [--fail-on-stalled]
                             [--json] [--junit FILE] [--markdown FILE] [--jobs N]
    together-clusters status [-s NAME] [-C DIR] [--price-per-gpu-hour P] [--png FILE] [--json]
                             [--fail-on-stalled]
    together-clusters drill  [--kubeconfig FILE] [--context NAME] [-n NAMESPACE] [--node NAME]
                             [--twin URL [--termination MODE]] [--remediation MODE [--cluster-id ID]]
                             [--dry-run] [--yes] [--json]
    together-clusters remediations list|approve ID|reject ID --comment TEXT|gate --modes M,...
                             [--cluster-id ID] [--kubeconfig FILE] [--context NAME] [--json]
                             [approve: --timeout S --dry-run --force]
    together-clusters plugin install [--pulumi PATH] [--json]

Without -s/--stack, drift and status use the selected stack, as pulumi does.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from together_clusters.errors import MissingExtraError
from together_clusters.provider.errors import TogetherError

from .arguments import Parser, add_version
from .drift import command as drift
from .drill import command as drill
from .exit_codes import ExitCode, help_table
from .plugin import command as plugin
from .remediations import command as remediations
from .status import command as status
from .workspace import EngineError

COMMANDS = {"drift": drift, "status": status, "drill": drill, "remediations": remediations, "plugin": plugin}
"""Each subcommand and its module (``cli/<name>/command.py``): ``add_parser(sub)`` registers it,
``run(args)`` runs it and returns its :class:`ExitCode`."""


def build_parser() -> argparse.ArgumentParser:
    """The top parser: one subcommand per command module; the exit codes' table as its epilog."""
    parser = Parser(
        prog="together-clusters",
        description=__doc__,
        epilog=help_table(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_version(parser)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in COMMANDS.values():
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The ``together-clusters`` entry point: parse, run the command, return its exit code."""
    args = build_parser().parse_args(argv)
    if args.command in ("drill", "remediations"):
        # These report their own errors (the Kubernetes client's, the twin's HTTP, the gate's).
        return COMMANDS[args.command].run(args)
    try:
        return COMMANDS[args.command].run(args)
    except (EngineError, TogetherError, OSError) as exc:
        message = " ".join(str(exc).split())
        if isinstance(exc, TogetherError) and not isinstance(exc, EngineError | MissingExtraError):
            message = f"the Together API failed: {message}"
        print(f"together-clusters {args.command}: error: {message}", file=sys.stderr)
        if args.json:
            print(json.dumps({"exit_code": ExitCode.ERROR, "error": message}, indent=2))
        return ExitCode.ERROR
