"""The S3 backend against moto's server over real HTTP."""

from __future__ import annotations

import logging
import signal
import uuid
from typing import Any

import pytest

from together_clusters.components.checkpoint import (
    PREEMPTED_EXIT_CODE,
    Checkpointer,
    RuntimeConfig,
    S3Backend,
)
from together_clusters.components.checkpoint.checkpointer import MANIFEST

from .conftest import S3_CREDENTIALS, Worker
from .worker import state_for


@pytest.fixture
def bucket(s3_client: Any) -> str:
    name = f"ckpt-{uuid.uuid4().hex[:12]}"
    s3_client.create_bucket(Bucket=name)
    return name


def s3_worker_env(bucket: str, endpoint: str, **extra: str) -> dict[str, str]:
    """The environment of a worker process that saves to ``bucket`` on the test S3 and resumes from it."""
    return {
        **S3_CREDENTIALS,
        "CHECKPOINT_BACKEND": "s3",
        "CHECKPOINT_S3_BUCKET": bucket,
        "CHECKPOINT_S3_ENDPOINT": endpoint,
        "CHECKPOINT_RESUME": "true",
        **extra,
    }


RECORDED = ("PutObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload", "GetObject")


class RequestLog:
    """Every S3 write and GET the client sends, in order, as (operation, key), from botocore's own event
    hooks."""

    def __init__(self, client: Any) -> None:
        self.calls: list[tuple[str, str]] = []
        client.meta.events.register("before-parameter-build.s3", self._record)

    def _record(self, model: Any, params: Any, **_: Any) -> None:
        if model.name in RECORDED:
            self.calls.append((model.name, params["Key"]))

    def visible_keys(self) -> list[str]:
        """Keys in the order their objects became visible (a PUT, or a multipart upload's completion)."""
        return [key for op, key in self.calls if op in ("PutObject", "CompleteMultipartUpload")]

    def downloads(self) -> list[str]:
        """Keys of every GET (each ranged GET of a download counts), manifests left out."""
        return [key for op, key in self.calls if op == "GetObject" and not key.endswith(MANIFEST)]


def test_save_and_resume_through_s3_with_the_manifest_last(
    s3_client: Any, s3_endpoint: str, bucket: str
) -> None:
    requests = RequestLog(s3_client)
    ckpt = Checkpointer(S3Backend(bucket, "runs/ft", client=s3_client), keep=2)
    name = ckpt.save(3, state_for(3))
    visible = requests.visible_keys()
    assert visible[-1] == f"runs/ft/{name}/{MANIFEST}"
    assert sorted(visible[:-1]) == [f"runs/ft/{name}/state.json", f"runs/ft/{name}/weights.bin"]

    fresh = Checkpointer(S3Backend(bucket, "runs/ft", endpoint_url=s3_endpoint))
    loaded = fresh.latest()
    assert loaded is not None and loaded.step == 3 and loaded.files == state_for(3)


def test_s3_entries_without_manifest_or_with_bad_checksums_are_skipped(
    s3_client: Any, bucket: str, caplog: pytest.LogCaptureFixture
) -> None:
    ckpt = Checkpointer(S3Backend(bucket, "p", client=s3_client), keep=5)
    ckpt.save(1, state_for(1))
    corrupt = ckpt.save(2, state_for(2))
    s3_client.put_object(Bucket=bucket, Key=f"p/{corrupt}/weights.bin", Body=b"tampered")
    s3_client.put_object(Bucket=bucket, Key="p/ckpt-000000000009-00000000000000000000/state.json", Body=b"{}")
    with caplog.at_level(logging.WARNING):
        loaded = ckpt.latest()
    assert loaded is not None and loaded.step == 1
    assert any(f"skipping corrupt checkpoint {corrupt}" in r.getMessage() for r in caplog.records)


def test_resume_reads_each_object_once_and_falls_back_past_a_damaged_one(
    s3_client: Any, bucket: str, caplog: pytest.LogCaptureFixture
) -> None:
    ckpt = Checkpointer(S3Backend(bucket, "r", client=s3_client), keep=5, config=RuntimeConfig(resume=True))
    ckpt.save(1, state_for(1))
    damaged = ckpt.save(2, state_for(2))
    weights = s3_client.get_object(Bucket=bucket, Key=f"r/{damaged}/weights.bin")["Body"].read()
    tampered = bytes([weights[0] ^ 1]) + weights[1:]
    s3_client.put_object(Bucket=bucket, Key=f"r/{damaged}/weights.bin", Body=tampered)
    gets = RequestLog(s3_client)

    with caplog.at_level(logging.WARNING):
        resumed = ckpt.resume(lambda c: {name: c.files[name] for name in c.files})

    assert resumed is not None and resumed.step == 1 and resumed.state == state_for(1)
    assert any(f"skipping corrupt checkpoint {damaged}" in r.getMessage() for r in caplog.records)
    read = gets.downloads()  # files below one ranged GET: one GET per download
    assert sorted(read) == sorted(set(read)), f"an object was downloaded twice: {read}"


def test_resume_downloads_a_checkpoint_from_before_chunk_digests_once(s3_client: Any, bucket: str) -> None:
    import hashlib
    import json

    ckpt = Checkpointer(S3Backend(bucket, "old", client=s3_client), config=RuntimeConfig(resume=True))
    name = ckpt.save(4, state_for(4))
    manifest = {
        "format": 1,
        "step": 4,
        "metadata": {},
        "files": {
            file_name: {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
            for file_name, data in state_for(4).items()
        },
    }
    s3_client.put_object(Bucket=bucket, Key=f"old/{name}/{MANIFEST}", Body=json.dumps(manifest).encode())
    gets = RequestLog(s3_client)

    resumed = ckpt.resume(lambda c: {file_name: c.files[file_name] for file_name in c.files})

    assert resumed is not None and resumed.state == state_for(4)
    assert sorted(gets.downloads()) == sorted(f"old/{name}/{f}" for f in state_for(4)), gets.downloads()


def test_s3_keeps_the_last_n(s3_client: Any, bucket: str) -> None:
    ckpt = Checkpointer(S3Backend(bucket, "", client=s3_client), keep=2)
    for step in range(5):
        ckpt.save(step, {"s": bytes([step])})
    entries = sorted(ckpt.backend.entries())
    assert len(entries) == 2 and entries[0].startswith("ckpt-000000000003")
    keys = [o["Key"] for o in s3_client.list_objects_v2(Bucket=bucket)["Contents"]]
    assert len(keys) == 4


def test_sigterm_saves_to_s3_and_a_new_process_resumes(
    s3_endpoint: str, bucket: str, workers: list[Worker]
) -> None:
    env = s3_worker_env(
        bucket, s3_endpoint, CHECKPOINT_S3_PREFIX="runs/ft", CHECKPOINT_SAVE_BUDGET_SECONDS="60"
    )
    first = Worker(["train", "100000"], env)
    workers.append(first)
    first.wait_for(lambda line: line.startswith("STEP") and int(line.split()[1]) >= 3)
    first.process.send_signal(signal.SIGTERM)
    assert first.finish() == PREEMPTED_EXIT_CODE, first.stderr()

    saved = Checkpointer(S3Backend(bucket, "runs/ft", endpoint_url=s3_endpoint)).latest()
    assert saved is not None and saved.step >= 3 and saved.files == state_for(saved.step)

    second = Worker(["train", str(saved.step + 1)], env)
    workers.append(second)
    assert second.wait_for(lambda line: line.startswith("START")) == f"START {saved.step}"
    assert second.finish() == 0


def test_files_above_the_multipart_threshold_go_up_in_parts_and_come_back_intact(
    s3_client: Any, s3_endpoint: str, bucket: str
) -> None:
    requests = RequestLog(s3_client)
    ckpt = Checkpointer(S3Backend(bucket, "big", client=s3_client), keep=1)
    part = 8 * 1024 * 1024  # boto3's default part size, and our threshold
    blocks = [bytes([i]) * part for i in range(3)] + [b"tail"]
    name = ckpt.save(1, {"weights.bin": iter(blocks), "small.json": b"{}"})
    weights = f"big/{name}/weights.bin"
    assert ("CreateMultipartUpload", weights) in requests.calls
    assert [op for op, key in requests.calls if key == weights].count("UploadPart") == 4
    assert ("PutObject", f"big/{name}/small.json") in requests.calls
    assert requests.visible_keys()[-1] == f"big/{name}/{MANIFEST}"

    head = s3_client.head_object(Bucket=bucket, Key=weights)
    assert head["ContentLength"] == 3 * part + 4
    assert head["ETag"].strip('"').endswith("-4"), "S3 says it was not assembled from parts"

    fresh = Checkpointer(S3Backend(bucket, "big", endpoint_url=s3_endpoint)).latest()
    assert fresh is not None
    with fresh:
        stream = fresh.open("weights.bin")
        for block in blocks:
            assert stream.read(len(block)) == block
        assert stream.read() == b""


def test_a_checkpoint_larger_than_the_process_memory_cap_goes_through_s3(
    s3_endpoint: str, bucket: str, workers: list[Worker]
) -> None:
    env = s3_worker_env(bucket, s3_endpoint, MALLOC_ARENA_MAX="2")
    # Room for four 8 MiB parts in flight, the transfer threads' stacks and the client's buffers, but not
    # for the ten parts s3transfer would hold by default (the cap bit at random under a CI load then).
    worker = Worker(["capped", "144"], env)
    workers.append(worker)
    assert worker.finish() == 0, worker.stderr()
    assert "ONE BUFFER OF THAT SIZE DOES NOT FIT" in worker.seen, "the cap did not bite"
    assert worker.seen[-1] == "RESTORED INTACT"
