"""moto's S3 server in a process of its own; prints its URL, then serves until terminated."""

from __future__ import annotations

import threading

from moto.server import ThreadedMotoServer


def main() -> None:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    print(f"http://{host}:{port}", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
