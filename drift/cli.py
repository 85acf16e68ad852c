"""``together-clusters``: drift detection and capacity status for stacks of Together GPU clusters.

    together-clusters drift  --stack NAME [--cwd DIR] [--json]
    together-clusters status --stack NAME [--cwd DIR] [--price-per-gpu-hour P] [--png FILE] [--json]
    together-clusters drill  [--kubeconfig FILE] [--node NAME] [--twin URL [--termination MODE]] [--json]

Exit codes: 0 in sync (or status shown), 2 drift found, 1 error (engine or API failure, bad arguments).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

from together_clusters.provider.errors import TogetherError

from . import capacity, drill_command, live, sandbox
from .classify import EXIT_ERROR, classify
from .drift_render import drift_json, drift_text, error_json
from .engine import EngineError, Pulumi, find_pulumi
from .stack_state import StateResource, clusters
from .status_render import status_json, status_text
from .timeline import Timeline, allocation_timeline


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


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="together-clusters", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--stack", required=True, help="the stack to check (as `pulumi --stack` takes it)")
        p.add_argument(
            "--cwd", type=Path, default=Path.cwd(), help="the Pulumi project directory (default: .)"
        )
        p.add_argument("--json", action="store_true", help="print JSON for machines instead of tables")
        p.add_argument("--pulumi", default=None, help="the pulumi executable (default: pulumi on PATH)")

    check = sub.add_parser(
        "drift",
        help="compare the live resources with the last deployment and the code, without writing the state",
        description="Refresh a copy of the stack's state and classify every difference. "
        "Exit 0 in sync, 2 drift found, 1 error.",
    )
    common(check)

    status = sub.add_parser(
        "status",
        help="capacity of the stack's clusters: preemptible allocation, nodes, events, savings",
        description="Per cluster of the stack: desired and allocated preemptible GPUs, nodes, recent "
        "lifecycle events and the hourly saving of preemptible capacity. Reads the state, never writes it.",
    )
    common(status)
    status.add_argument(
        "--price-per-gpu-hour",
        type=_non_negative,
        default=None,
        metavar="P",
        help="on-demand price per GPU-hour, to estimate the saving (preemptible is 50%% off)",
    )
    status.add_argument(
        "--png",
        type=Path,
        default=None,
        metavar="FILE",
        help="also draw the allocation timeline and preemptions to this PNG file",
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


def run_drift(args: argparse.Namespace) -> int:
    pulumi = Pulumi(find_pulumi(args.pulumi), args.cwd)
    seen = sandbox.observe(pulumi, args.stack)
    report = classify(seen.deployed, seen.refreshed, seen.steps)
    print(
        drift_json(args.stack, report) if args.json else drift_text(args.stack, report),
        end="" if not args.json else "\n",
    )
    return report.exit_code


def run_status(args: argparse.Namespace) -> int:
    pulumi = Pulumi(find_pulumi(args.pulumi), args.cwd)
    resources = clusters(sandbox.export_stack(pulumi, args.stack))
    snapshots = live.fetch_snapshots([r.id for r in resources])
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
        message = str(exc)
        if isinstance(exc, TogetherError):
            message = f"the Together API failed: {message}"
        print(f"together-clusters {args.command}: error: {message}", file=sys.stderr)
        if args.json:
            print(error_json(args.stack, message))
        return EXIT_ERROR
