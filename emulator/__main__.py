"""``python -m together_clusters.emulator``: serve the emulated compute API; the first line printed is its base URL."""

from __future__ import annotations

import argparse
import signal
import sys
from types import FrameType

import uvicorn

from .kubernetes.options import add_kubernetes_args, twin_options
from .lifecycle import DEFAULT_SPEED
from .server import base_url_of, bind_socket, make_platform, uvicorn_config
from .store import Store


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m together_clusters.emulator", description=__doc__)
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
    add_kubernetes_args(parser)
    return parser.parse_args(argv)


def _exit_cleanly(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    store = Store(args.state) if args.state else None
    platform = make_platform(
        twin_options(args), store=store, speed=args.speed, grace_seconds=args.grace_seconds
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
