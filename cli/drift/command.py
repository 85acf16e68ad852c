"""The ``together-clusters drift`` subcommand: its arguments, and the check of a fleet of stacks it runs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..arguments import add_fail_on_stalled, add_project_options, add_stack_option, positive_int
from ..exit_codes import ExitCode
from ..workspace import EngineError, EngineSettings, open_workspace, selected_stack, stack_names
from .fleet import check_fleet
from .junit import junit_xml
from .markdown import markdown_summary
from .report import fleet_json, fleet_text
from .results import fleet_exit_code

DEFAULT_JOBS = 8


def add_parser(sub: Any) -> None:
    """Register ``together-clusters drift``."""
    check = sub.add_parser(
        "drift",
        help="compare the live resources with the code, without writing any state",
        description="Preview every stack with refresh and classify every difference between the live "
        "resources and the code: drift (changed outside the code), missing, changes pending (the code "
        "changed), information (capacity shortfall, preemptions, workloads stalled for capacity). "
        f"Exit {ExitCode.OK:d} in sync, {ExitCode.DRIFT:d} drift, {ExitCode.PENDING:d} changes pending with "
        f"--fail-on-pending, {ExitCode.STALLED:d} a workload stalled with --fail-on-stalled, "
        f"{ExitCode.ERROR:d} error; the worst over all stacks.",
    )
    which = check.add_mutually_exclusive_group()
    add_stack_option(which, many=True)
    which.add_argument("--all-stacks", action="store_true", help="check every stack of the project")
    add_project_options(check)
    check.add_argument(
        "--fail-on-pending",
        action="store_true",
        help=f"exit {ExitCode.PENDING:d} when the code has changes not yet deployed (for a nightly check of main); "
        "without it they are reported only (for pull requests, whose changes are pending by design)",
    )
    add_fail_on_stalled(check)
    check.add_argument("--junit", type=Path, metavar="FILE", help="also write a JUnit XML report to FILE")
    check.add_argument("--markdown", type=Path, metavar="FILE", help="also write a Markdown summary to FILE")
    check.add_argument(
        "--jobs",
        type=positive_int,
        default=DEFAULT_JOBS,
        help=f"stacks checked at once (default {DEFAULT_JOBS})",
    )


def run(args: argparse.Namespace) -> ExitCode:
    """Check the stacks, write the reports asked for; the exit code is the worst over all stacks."""
    workspace = open_workspace(EngineSettings(project_dir=args.cwd, pulumi=args.pulumi))
    if args.all_stacks:
        names = stack_names(workspace)
    else:
        names = list(dict.fromkeys(args.stacks or [selected_stack(workspace)]))
    if not names:
        raise EngineError(f"the project in {workspace.work_dir} has no stacks")
    results = check_fleet(workspace, names, jobs=args.jobs)
    pending, stalled = args.fail_on_pending, args.fail_on_stalled
    if args.junit is not None:
        args.junit.write_text(junit_xml(results, pending, stalled))
    if args.markdown is not None:
        args.markdown.write_text(markdown_summary(results, pending, stalled))
    if args.json:
        print(fleet_json(results, pending, stalled))
    else:
        print(fleet_text(results, pending, stalled), end="")
    return fleet_exit_code(results, pending, stalled)
