"""The drift check on a stack whose secrets provider is not a passphrase: AWS KMS, served offline by moto.

The check runs wherever the stack lives, with its own secrets provider (no copy of the stack into a
backend of our own, whose secrets provider would have to be the same): in sync is 0, an out-of-band
change is drift before and after a refresh, and nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import _engine
from tests.cli.conftest import Deployed, deploy_quickstart
from together_clusters.emulator.server import RunningEmulator

pytestmark = pytest.mark.engine

AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


@pytest.fixture(scope="module")
def kms_url() -> Iterator[str]:
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    try:
        kms = boto3.client(
            "kms",
            endpoint_url=endpoint,
            region_name=AWS["AWS_DEFAULT_REGION"],
            aws_access_key_id=AWS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=AWS["AWS_SECRET_ACCESS_KEY"],
        )
        key_id = kms.create_key(Description="drift test stack secrets")["KeyMetadata"]["KeyId"]
        yield f"awskms://{key_id}?region=us-east-1&endpoint={endpoint}"
    finally:
        server.stop()


@pytest.fixture(scope="module")
def on_kms(
    emu: RunningEmulator, kms_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployed]:
    # No passphrase anywhere: only the KMS key can open this stack's secrets.
    extra = {**AWS, "PULUMI_CONFIG_PASSPHRASE": ""}
    work = tmp_path_factory.mktemp("kms")
    state = deploy_quickstart(work, emu, "kms", init_args=("--secrets-provider", kms_url), extra_env=extra)
    state.env.pop("PULUMI_CONFIG_PASSPHRASE")
    yield state
    _engine.run_pulumi(["destroy", *_engine.UP_FLAGS], cwd=state.project, env=state.env)


def test_the_stack_really_uses_kms(on_kms: Deployed):
    config = (on_kms.project / "Pulumi.kms.yaml").read_text()
    assert "secretsprovider: awskms://" in config and "encryptionsalt" not in config


def test_in_sync_then_drift_before_and_after_a_refresh_writing_nothing(on_kms: Deployed):
    on_kms.restore()
    runs = []
    before, exported = on_kms.files(), on_kms.pulumi("stack", "export").stdout.encode()
    runs.append(on_kms.cli("drift"))
    on_kms.unchanged(before, exported)

    on_kms.set_preemptible(16)
    before, exported = on_kms.files(), on_kms.pulumi("stack", "export").stdout.encode()
    runs.append(on_kms.cli("drift"))
    on_kms.unchanged(before, exported)

    on_kms.pulumi("refresh", *_engine.UP_FLAGS)
    before, exported = on_kms.files(), on_kms.pulumi("stack", "export").stdout.encode()
    runs.append(on_kms.cli("drift"))
    on_kms.unchanged(before, exported)

    assert [r.returncode for r in runs] == [0, 2, 2], "\n".join(r.stdout + r.stderr for r in runs)
    for run in runs[1:]:
        assert "num_preemptible_gpus" in run.stdout
