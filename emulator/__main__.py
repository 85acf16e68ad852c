"""``python -m together_clusters.emulator``: serve the emulated compute API; the first line printed is its base URL."""

from __future__ import annotations

import argparse
import signal
import sys
from types import FrameType

from together_clusters._extras import requires_extra
from together_clusters.errors import MissingExtraError

from .kubernetes.options import add_kubernetes_args, twin_options
from .lifecycle import DEFAULT_SPEED
from .store import Store

PROG = "python -m together_clusters.emulator"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Serve the emulated compute API; the first line printed is its base URL.",
    )
    parser.add_argument("--port", type=int, required=True, help="port to listen on; 0 picks a free one")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--state", default=None, help="SQLite file holding the platform across restarts")
    parser.add_argument(
        "--speed",
        type=float,
        default=None,
        help=f"emulated seconds per real second (default {DEFAULT_SPEED:g}, or the speed saved in --state)",
    )
    parser.add_argument(
        "--grace-seconds",
        type=float,
        default=None,
        help="emulated seconds a preempted node lives after being cordoned (default 300)",
    )
    parser.add_argument(
        "--extra-fields",
        action="store_true",
        help="add fields the official SDK does not define: each GPU node's compute_class and labels "
        "(by default replies have exactly the SDK's shapes)",
    )
    parser.add_argument(
        "--default-driver",
        action="store_true",
        help="accept a create without a driver selector and pick the region's newest driver "
        "(the real API refuses it: give nvidia_version_id, or cuda_version with nvidia_driver_version)",
    )
    add_kubernetes_args(parser)
    return parser.parse_args(argv)


def _exit_cleanly(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        serve(args)
    except MissingExtraError as error:
        sys.exit(f"{PROG}: error: {error}")


def serve(args: argparse.Namespace) -> None:
    """Serve until SIGINT or SIGTERM."""
    with requires_extra("emulator", "the emulator"):
        import uvicorn

        from .server import base_url_of, bind_socket, make_platform, uvicorn_config
    store = Store(args.state) if args.state else None
    platform = make_platform(
        twin_options(args),
        store=store,
        speed=args.speed,
        grace_seconds=args.grace_seconds,
        extra_fields=args.extra_fields,
        default_driver=args.default_driver,
    )
    sock = bind_socket(args.host, args.port)
    print(base_url_of(sock), flush=True)
    # Uvicorn shuts down gracefully on SIGINT/SIGTERM and then re-raises the signal: make both a clean exit.
    signal.signal(signal.SIGTERM, _exit_cleanly)
    try:
        uvicorn.Server(uvicorn_config(platform)).run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        platform.close()
        platform.flush()
        if store is not None:
            store.close()
        sys.stdout.flush()


if __name__ == "__main__":
    main()
