"""A workload process for the checkpoint tests, configured through the contract's environment.

python worker.py train TOTAL     step until TOTAL (printing STEP n), checkpointing on SIGTERM
python worker.py periodic TOTAL EVERY   the same, also saving every EVERY steps (printing SAVED n)
python worker.py slow-save       save step 1, then hang half-way through writing step 2
python worker.py launch -- CMD   the launch wrapper around CMD
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import resource
import sys
import threading
import time

from together_clusters.components.checkpoint import (
    Checkpointer,
    PreemptionHandler,
    RequestDrain,
    Snapshot,
    WorldCheckpointer,
    launch,
)


def state_for(step: int) -> dict[str, bytes]:
    """A state whose every byte depends on the step, so a torn or mixed checkpoint is detectable."""
    weights = hashlib.sha256(str(step).encode()).digest() * 4096
    return {"state.json": json.dumps({"step": step}).encode(), "weights.bin": weights}


def say(line: str) -> None:
    print(line, flush=True)


def resumed_step(ckpt: Checkpointer) -> int:
    """The step the environment's checkpoints resume from (0 without one), its state checked whole."""
    resumed = ckpt.restore()
    if resumed is None:
        return 0
    step: int = json.loads(resumed.files["state.json"])["step"]
    assert resumed.files == state_for(step), "resumed state is not the one saved"
    return step


def train(total: int) -> int:
    ckpt = Checkpointer.from_env()
    step = resumed_step(ckpt)
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


class HoldingHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A log handler that, for the record "hold", keeps its lock (as a slow or blocked stderr would)."""

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() == "hold":
            say("HOLDING THE LOGGING LOCK")
            time.sleep(600)
        super().emit(record)


def train_holding_the_log_lock() -> int:
    """Train until step 3, then block inside logging: SIGTERM lands while the main thread holds its lock."""
    logging.getLogger().handlers[:] = [HoldingHandler(sys.stderr)]
    ckpt = Checkpointer.from_env()
    latest = Snapshot(0, state_for(0))
    PreemptionHandler(ckpt, lambda: latest).install()
    for step in range(1, 4):
        ckpt.save(step, state_for(step))
        latest = Snapshot(step, state_for(step))
    logging.getLogger("train").warning("hold")
    return 0


MIB = 1024 * 1024


def data_size() -> int:
    """This process's data segment and private writable mappings (what RLIMIT_DATA caps), in bytes."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmData in /proc/self/status")


def roundtrip_under_a_memory_cap(headroom_mib: int) -> int:
    """Cap this process's memory, then save and restore one file larger than the whole cap."""
    ckpt = Checkpointer.from_env()
    limit = data_size() + headroom_mib * MIB
    size = limit + headroom_mib * MIB
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    try:
        bytearray(size)
    except MemoryError:
        say("ONE BUFFER OF THAT SIZE DOES NOT FIT")
    written = hashlib.sha256()

    def chunks():  # type: ignore[no-untyped-def]
        for i in range(size // MIB):
            block = i.to_bytes(8, "big") * (MIB // 8)
            written.update(block)
            yield block

    ckpt.save(1, {"weights.bin": chunks()})
    say(f"SAVED {size} BYTES UNDER A LIMIT OF {limit}")
    restored = ckpt.restore()
    assert restored is not None
    read = hashlib.sha256()
    with restored:
        stream = restored.open("weights.bin")
        while block := stream.read(MIB):
            read.update(block)
    say("RESTORED INTACT" if read.digest() == written.digest() else "RESTORED DIFFERENT BYTES")
    return 0


def world_train(total: int, save_every: int) -> int:
    """One rank of a distributed run: shards every ``save_every`` steps, rank 0 commits.

    DIE_AT_STEP makes this rank kill itself just before saving that step, as a preemption would.
    GIVE_UP_AT_STEP is a step some rank will never save: its commit is awaited GIVE_UP_SECONDS only
    (the outcome is the same however long the wait), every other commit up to a minute (only a hang
    takes that long, whatever the machine's speed).
    """
    import signal

    world = WorldCheckpointer.from_env(os.environ["WORLD_ROUND"])
    rank = world.rank
    resumed = world.restore()
    step = 0
    if resumed is not None:
        with resumed:
            step = json.loads(resumed.files["state.json"])["step"]
            assert resumed.files["state.json"] == shard_for(rank, step), "resumed another rank's shard"
    say(f"START {step}")
    die_at = int(os.environ.get("DIE_AT_STEP", "-1"))
    give_up_at = int(os.environ.get("GIVE_UP_AT_STEP", "-1"))
    while step < total:
        step += 1
        if step % save_every == 0:
            if step == die_at:
                say(f"DYING AT {step}")
                os.kill(os.getpid(), signal.SIGKILL)
            world.save_shard(step, {"state.json": shard_for(rank, step)})
            timeout = float(os.environ["GIVE_UP_SECONDS"]) if step == give_up_at else 60.0
            if rank == 0:
                committed = world.commit(step, timeout_seconds=timeout)
            else:  # as a collective barrier would: no rank runs ahead of the last commit
                committed = world.wait_for_commit(step, timeout_seconds=timeout)
            say(f"{'COMMITTED' if committed else 'UNCOMMITTED'} {step}")
            if not committed:
                return 1
    say(f"DONE {step}")
    return 0


def shard_for(rank: int, step: int) -> bytes:
    return json.dumps({"rank": rank, "step": step}).encode()


def return_on_sigterm(how: str) -> int:
    """A training loop that returns 0 at once after SIGTERM: the process must still save, then exit 143.

    ``handled``: the main thread returns as soon as the signal's handler has run (before the handler's
    thread has taken it, most often); ``stopping``: as soon as the handler's flag is set. The snapshot is
    slow, so an exit that does not wait for the save shows.
    """
    import signal

    def slow_snapshot() -> Snapshot:
        time.sleep(1)
        return Snapshot(7, state_for(7))

    handler = PreemptionHandler(Checkpointer.from_env(), slow_snapshot).install()
    handled = threading.Event()
    on_sigterm = signal.getsignal(signal.SIGTERM)

    def note_then_handle(signum: int, frame: object) -> None:
        on_sigterm(signum, frame)  # type: ignore[operator]
        handled.set()

    signal.signal(signal.SIGTERM, note_then_handle)
    say("READY")
    if how == "handled":
        while not handled.is_set():
            time.sleep(0.001)
    else:
        while not handler.stopping.is_set():
            pass
    say("RETURNING")
    return 0


def save_that_overruns() -> int:
    """A SIGTERM save stuck on storage: the process must still exit 143 within the budget, not be SIGKILLed."""

    def stuck() -> Snapshot:
        time.sleep(600)
        return Snapshot(1, {})

    PreemptionHandler(Checkpointer.from_env(), stuck).install()
    say("READY")
    time.sleep(600)
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


def periodic(total: int, every: int) -> int:
    """Train as a user's loop does: save every ``every`` steps and on SIGTERM; whatever a save raises ends
    the process, as it would a user's (CheckpointSuperseded: exit 1 and its line on stderr)."""
    ckpt = Checkpointer.from_env()
    step = resumed_step(ckpt)
    latest = Snapshot(step, state_for(step))
    handler = PreemptionHandler(ckpt, lambda: latest).install()
    say(f"START {step}")  # once SIGTERM is handled: a test may send it as soon as it reads this
    while step < total and not handler.stopping.is_set():
        time.sleep(0.02)
        step += 1
        latest = Snapshot(step, state_for(step))
        if step % every == 0:
            ckpt.save(step, state_for(step))
            say(f"SAVED {step}")
    return 0


def drain() -> int:
    requests = iter(f"r{i}" for i in range(1000))

    def handle(request: str, cancelled: threading.Event) -> None:
        say(f"HANDLING {request}")
        cancelled.wait(600)
        say(f"STOPPED {request}")
        raise RuntimeError("cancelled")

    drain = RequestDrain[str].from_env()
    if stop_seconds := os.environ.get("DRAIN_STOP_SECONDS"):  # the test's own reserve, not the contract's
        drain = RequestDrain[str](drain.budget_seconds, float(stop_seconds))
    finished = drain.install().run(lambda: next(requests), handle, lambda r: say(f"HANDED BACK {r}"))
    return 0 if finished else 143


MODES = {
    "overrun": save_that_overruns,
    "return-on-sigterm": lambda: return_on_sigterm(sys.argv[2]),
    "world": lambda: world_train(int(sys.argv[2]), int(sys.argv[3])),
    "capped": lambda: roundtrip_under_a_memory_cap(int(sys.argv[2])),
    "slow-save": slow_save,
    "drain": drain,
    "periodic": lambda: periodic(int(sys.argv[2]), int(sys.argv[3])),
    "hold-log-lock": train_holding_the_log_lock,
}

if __name__ == "__main__":
    if sys.argv[1] == "launch":
        sys.exit(launch.main(sys.argv[2:]))
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    mode = sys.argv[1]
    sys.exit(train(int(sys.argv[2])) if mode == "train" else MODES[mode]())  # type: ignore[operator]
