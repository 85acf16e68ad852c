"""Load for the GET/s figure: threads issuing GETs over keep-alive connections for a fixed time.

    python -m tests.bench.load_client BASE_URL SECONDS THREADS PATH [PATH ...]

Prints one JSON line: ``requests`` completed with status 200, ``errors``, ``seconds``.
"""

from __future__ import annotations

import json
import sys
import threading
import time

import httpx

API_KEY = "bench-api-key"


def main(argv: list[str]) -> None:
    base_url, duration, threads, paths = argv[0], float(argv[1]), int(argv[2]), argv[3:]
    counts = [0] * threads
    errors = [0] * threads
    deadline = [0.0]

    def begin() -> None:
        deadline[0] = time.monotonic() + duration

    start = threading.Barrier(threads + 1, action=begin)

    def work(index: int) -> None:
        with httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=30) as c:
            start.wait()
            i = index
            while time.monotonic() < deadline[0]:
                reply = c.get(paths[i % len(paths)])
                i += threads
                if reply.status_code == 200:
                    counts[index] += 1
                else:
                    errors[index] += 1

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    start.wait()
    began = deadline[0] - duration
    for w in workers:
        w.join()
    print(json.dumps({"requests": sum(counts), "errors": sum(errors), "seconds": time.monotonic() - began}))


if __name__ == "__main__":
    main(sys.argv[1:])
