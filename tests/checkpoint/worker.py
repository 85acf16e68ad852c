"""A workload process for the checkpoint tests, configured through the contract's environment.

python worker.py train TOTAL     step until TOTAL (printing STEP n), checkpointing on SIGTERM
python worker.py slow-save       save step 1, then hang half-way through writing step 2
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import time

from together_clusters.components.checkpoint import Checkpointer, PreemptionHandler, RequestDrain, Snapshot


def state_for(step: int) -> dict[str, bytes]:
    """A state whose every byte depends on the step, so a torn or mixed checkpoint is detectable."""
    weights = hashlib.sha256(str(step).encode()).digest() * 4096
    return {"state.json": json.dumps({"step": step}).encode(), "weights.bin": weights}


def say(line: str) -> None:
    print(line, flush=True)


def train(total: int) -> int:
    ckpt = Checkpointer.from_env()
    resumed = ckpt.restore()
    step = 0
    if resumed is not None:
        step = json.loads(resumed.files["state.json"])["step"]
        assert resumed.files == state_for(step), "resumed state is not the one saved"
    say(f"START {step}")
    latest = Snapshot(step, state_for(step))
    PreemptionHandler(ckpt, lambda: latest).install()
    while step < total:
        time.sleep(0.05)
        step += 1
        latest = Snapshot(step, state_for(step))
        say(f"STEP {step}")
    say(f"DONE {step}")
    return 0


def slow_save() -> int:
    ckpt = Checkpointer.from_env()
    ckpt.save(1, state_for(1))
    say("SAVED 1")
    weights = state_for(2)["weights.bin"]

    def chunks():  # type: ignore[no-untyped-def]
        yield weights[: len(weights) // 2]
        say("MIDWRITE")
        time.sleep(600)
        yield weights[len(weights) // 2 :]

    ckpt.save(2, {"state.json": state_for(2)["state.json"], "weights.bin": chunks()})
    return 0


def drain() -> int:
    requests = iter(f"r{i}" for i in range(1000))

    def handle(request: str) -> None:
        say(f"HANDLING {request}")
        time.sleep(600)

    finished = (
        RequestDrain[str]
        .from_env()
        .install()
        .run(lambda: next(requests), handle, lambda r: say(f"HANDED BACK {r}"))
    )
    return 0 if finished else 143


MODES = {"slow-save": slow_save, "drain": drain}

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    mode = sys.argv[1]
    sys.exit(train(int(sys.argv[2])) if mode == "train" else MODES[mode]())
