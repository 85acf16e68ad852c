"""``together-clusters``: drift detection and capacity status for stacks of Together GPU clusters.

    together-clusters drift  [--stack NAME ...| --all-stacks] [--cwd DIR] [--fail-on-pending]
                             [--json] [--junit FILE] [--markdown FILE] [--jobs N]
    together-clusters status --stack NAME [--cwd DIR] [--price-per-gpu-hour P] [--png FILE] [--json]
    together-clusters drill  [--kubeconfig FILE] [--node NAME] [--twin URL [--termination MODE]] [--json]

drift exit codes (the worst over all stacks): 1 error (a stack could not be checked), 2 drift found,
3 changes pending (only with --fail-on-pending), 0 in sync. status: 0 shown, 1 error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

from together_clusters.errors import MissingExtraError
from together_clusters.provider.client import TogetherClient
from together_clusters.provider.errors import TogetherError

from . import api_settings, capacity, drill_command, live
from .classify import EXIT_ERROR
from .drift_render import fleet_json, fleet_text
from .fleet import check_fleet
from .junit import junit_xml
from .markdown import markdown_summary
from .observe import export
from .results import fleet_exit_code
from .stack_state import StateResource, clusters
from .status_render import status_json, status_text
from .timeline import Timeline, allocation_timeline
from .workspace import EngineError, EngineSettings, StackInPlace, engine_call, open_workspace, stack_names

DEFAULT_JOBS = 8


class _Parser(argparse.ArgumentParser):
    """Bad arguments exit 1 like any other error (argparse's own code, 2, means drift here)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message}\n")


def _non_negative(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0; got {text}")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1; got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="together-clusters", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--cwd", type=Path, default=Path.cwd(), help="the Pulumi project directory (default: .)"
        )
        p.add_argument("--json", action="store_true", help="print JSON for machines instead of tables")
        p.add_argument(
            "--pulumi", type=Path, default=None, help="the pulumi executable, in a bin folder (default: PATH)"
        )

    check = sub.add_parser(
        "drift",
        help="compare the live resources with the code, without writing any state",
        description="Preview every stack with refresh and classify every difference between the live "
        "resources and the code: drift (changed outside the code), missing, changes pending (the code "
        "changed), information (capacity shortfall, preemptions). Exit 0 in sync, 2 drift, "
        "3 changes pending with --fail-on-pending, 1 error; the worst over all stacks.",
    )
    which = check.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--stack",
        action="append",
        dest="stacks",
        metavar="NAME",
        help="a stack to check (repeat for several)",
    )
    which.add_argument("--all-stacks", action="store_true", help="check every stack of the project")
    common(check)
    check.add_argument(
        "--fail-on-pending",
        action="store_true",
        help="exit 3 when the code has changes not yet deployed (for a nightly check of main); "
        "without it they are reported only (for pull requests, whose changes are pending by design)",
    )
    check.add_argument("--junit", type=Path, metavar="FILE", help="also write a JUnit XML report to FILE")
    check.add_argument("--markdown", type=Path, metavar="FILE", help="also write a Markdown summary to FILE")
    check.add_argument(
        "--jobs",
        type=_positive_int,
        default=DEFAULT_JOBS,
        help=f"stacks checked at once (default {DEFAULT_JOBS})",
    )

    status = sub.add_parser(
        "status",
        help="capacity of the stack's clusters: preemptible allocation, nodes, events, savings",
        description="Per cluster of the stack: desired and allocated preemptible GPUs, nodes, recent "
        "lifecycle events and the hourly saving of preemptible capacity. Reads the state, never writes it. "
        "The API key and endpoint are the stack's (together:apiKey, together:baseUrl, the endpoint a "
        "cluster was created on), else TOGETHER_API_KEY / TOGETHER_BASE_URL.",
    )
    status.add_argument("--stack", required=True, help="the stack (as `pulumi --stack` takes it)")
    common(status)
    status.add_argument(
        "--price-per-gpu-hour",
        type=_non_negative,
        default=None,
        metavar="P",
        help="on-demand price per GPU-hour, to estimate the saving (preemptible is 50%% off)",
    )
    status.add_argument(
        "--png", type=Path, default=None, metavar="FILE", help="also draw the allocation timeline to this PNG"
    )
    status.add_argument(
        "--window-hours",
        type=_non_negative,
        default=24.0,
        metavar="H",
        help="how far back events and the timeline go (default 24)",
    )
    drill_command.add_parser(sub)
    return parser


def _settings(args: argparse.Namespace) -> EngineSettings:
    return EngineSettings(project_dir=args.cwd, pulumi=args.pulumi)


def run_drift(args: argparse.Namespace) -> int:
    workspace = open_workspace(_settings(args))
    names = stack_names(workspace) if args.all_stacks else list(dict.fromkeys(args.stacks))
    if not names:
        raise EngineError(f"the project in {workspace.work_dir} has no stacks")
    results = check_fleet(workspace, names, jobs=args.jobs)
    pending = args.fail_on_pending
    if args.junit is not None:
        args.junit.write_text(junit_xml(results, pending))
    if args.markdown is not None:
        args.markdown.write_text(markdown_summary(results, pending))
    if args.json:
        print(fleet_json(results, pending))
    else:
        print(fleet_text(results, pending), end="")
    return fleet_exit_code(results, pending)


def run_status(args: argparse.Namespace) -> int:
    stack = StackInPlace(args.stack, open_workspace(_settings(args)))
    config = engine_call(f"reading the config of stack {stack.name}", stack.get_all_config)
    resources = clusters(export(stack))
    stack_api = api_settings.from_stack_config(config)
    snapshots = _snapshots(resources, stack_api)
    end = capacity.window_end(list(snapshots.values()), datetime.now(UTC))
    start, end = capacity.window(end, args.window_hours)
    price = args.price_per_gpu_hour
    statuses = [
        capacity.cluster_status(
            r.name, r.id, snapshots.get(r.id), start=start, end=end, price_per_gpu_hour=price
        )
        for r in resources
    ]
    if args.png is not None:
        from .plot import write_png

        write_png(args.png, args.stack, _timelines(resources, snapshots, start, end))
    if args.json:
        print(status_json(args.stack, statuses, start, end, price))
    else:
        print(status_text(args.stack, statuses, start, end, price), end="")
        if args.png is not None:
            print(f"\nTimeline written to {args.png}")
    return 0


def _snapshots(resources: Sequence[StateResource], stack_api: api_settings.ApiSettings) -> dict[str, Any]:
    """Each cluster read with the key and endpoint the provider would use for it."""
    by_settings: dict[api_settings.ApiSettings, list[str]] = {}
    for res in resources:
        by_settings.setdefault(api_settings.for_cluster(res, stack_api), []).append(res.id)
    found: dict[str, Any] = {}
    for settings, ids in by_settings.items():
        with TogetherClient(api_key=settings.api_key, base_url=settings.base_url) as client:
            found.update(live.fetch_snapshots(ids, client))
    return found


def _timelines(
    resources: Sequence[StateResource], snapshots: dict[str, Any], start: datetime, end: datetime
) -> list[tuple[str, Timeline]]:
    """One timeline per live cluster, from the window's start or the cluster's creation, whichever is later."""
    lines = []
    for res in resources:
        snap = snapshots.get(res.id)
        if snap is None:
            continue
        created = snap.get("created_at")
        begin = max(start, capacity.parse_time(created)) if created else start
        lines.append((res.name, allocation_timeline(snap, begin, end)))
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "drill":
        return drill_command.run(args)
    try:
        return run_drift(args) if args.command == "drift" else run_status(args)
    except (EngineError, TogetherError, OSError) as exc:
        message = " ".join(str(exc).split())
        if isinstance(exc, TogetherError) and not isinstance(exc, EngineError | MissingExtraError):
            message = f"the Together API failed: {message}"
        print(f"together-clusters {args.command}: error: {message}", file=sys.stderr)
        if args.json:
            print(json.dumps({"exit_code": EXIT_ERROR, "error": message}, indent=2))
        return EXIT_ERROR
