"""Run by tests/packaging/test_core_install.py with the python of a virtualenv holding the wheel without
extras (``python -I``: nothing of the repository is on the path). Prints one JSON object: which modules are
importable, the Pulumi versions, where the package was imported from, and the Kubernetes objects a
BatchJob registers under Pulumi's mocks (rendered through the installed pulumi-kubernetes SDK)."""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
import json
from typing import Any

import pulumi

OPTIONAL = ("fastapi", "uvicorn", "starlette", "matplotlib", "kubernetes", "cryptography", "boto3")


class Mocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.registered: list[tuple[str, dict[str, Any]]] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.registered.append((args.typ, dict(args.inputs)))
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return {}, None


def main() -> None:
    import together_clusters
    from together_clusters.components import BatchJob, BatchJobArgs, ContainerSpec, SharedVolume
    from together_clusters.provider import Cluster, ClusterArgs

    asyncio.set_event_loop(asyncio.new_event_loop())
    mocks = Mocks()
    pulumi.runtime.set_mocks(mocks, project="core-install", stack="test", preview=False)

    @pulumi.runtime.test
    def program() -> pulumi.Output[Any]:
        BatchJob(
            "ft",
            BatchJobArgs(
                container=ContainerSpec(image="ghcr.io/example/trainer:1.0", gpus=8),
                checkpoint=SharedVolume(claim_name="ckpt"),
            ),
        )
        return pulumi.Output.from_input(None)

    program()
    print(
        json.dumps(
            {
                "importable": [m for m in OPTIONAL if importlib.util.find_spec(m) is not None],
                "pulumi": importlib.metadata.version("pulumi"),
                "pulumi-kubernetes": importlib.metadata.version("pulumi-kubernetes"),
                "package": together_clusters.__file__,
                "provider": f"{Cluster.__module__}.{Cluster.__name__}/{ClusterArgs.__name__}",
                "objects": sorted(
                    f"{inputs['kind']}/{inputs['metadata']['name']}"
                    for typ, inputs in mocks.registered
                    if typ.startswith("kubernetes:") and "kind" in inputs
                ),
                "types": sorted({typ for typ, _ in mocks.registered}),
            }
        )
    )


if __name__ == "__main__":
    main()
