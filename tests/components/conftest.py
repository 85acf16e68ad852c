"""Pulumi unit-test mocks and Kubernetes schema validation for the component tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import kubernetes_validate
import pulumi
import pytest

from together_clusters.components import _shell, kube
from together_clusters.components.controllers import detection

# The oldest version with every field the components use at GA or on by default, and the newest schema shipped.
K8S_VERSIONS = ("1.33.0", kubernetes_validate.latest_version())


@pytest.fixture(autouse=True)
def event_loop_of_the_program() -> Iterator[None]:
    """The thread's event loop that Pulumi's mocks register resources on, one per test.

    ``set_mocks`` creates futures outside any running loop, on the thread's current one. Without this
    the tests relied on asyncio creating that loop implicitly, which it no longer does once any
    ``asyncio.run`` in the session has returned (it leaves the thread with no loop set).
    """
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        yield
    finally:
        asyncio.set_event_loop(None)
        loop.close()


@dataclass
class Registered:
    """One resource the program registered, as the engine would have seen it."""

    typ: str
    name: str
    inputs: dict[str, Any]
    provider: str | None


class RecordingMocks(pulumi.runtime.Mocks):
    """Echo inputs back as outputs and remember every registration."""

    def __init__(self) -> None:
        self.registered: list[Registered] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.registered.append(Registered(args.typ, args.name, dict(args.inputs), args.provider))
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return {}, None


def normalise(value: Any) -> Any:
    """Undo the protobuf round trip, which turns every number into a float."""
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class Program:
    """Runs a Pulumi program under mocks and exposes what it registered."""

    def __init__(self) -> None:
        self.mocks = RecordingMocks()
        pulumi.runtime.set_mocks(self.mocks, project="components-test", stack="test", preview=False)

    def run(self, build: Callable[[], Any]) -> Any:
        result: dict[str, Any] = {}

        @pulumi.runtime.test
        def program() -> pulumi.Output[Any]:
            result["value"] = build()
            return pulumi.Output.from_input(None)

        program()
        return result["value"]

    def kubernetes_objects(self) -> dict[str, dict[str, Any]]:
        """Every Kubernetes object registered, keyed ``Kind/name``, in API field names."""
        objects = {}
        for r in self.mocks.registered:
            # A Helm chart (ClusterControllers') is a component of objects, not an object.
            if r.typ.startswith("kubernetes:") and not r.typ.startswith("kubernetes:helm.sh/"):
                obj = normalise(r.inputs)
                objects[f"{obj['kind']}/{obj['metadata']['name']}"] = obj
        return objects

    def by_type(self, prefix: str) -> list[Registered]:
        return [r for r in self.mocks.registered if r.typ.startswith(prefix)]


@pytest.fixture
def program() -> Program:
    return Program()


def assert_schema_valid(obj: dict[str, Any]) -> None:
    """Strict validation (no unknown fields) against the Kubernetes OpenAPI schemas the package ships.

    A JobSet (no schema shipped): each of its Jobs is validated as a batch/v1 Job; the JobSet itself is
    checked by the real API server and JobSet's webhook in the twin tests (tests/twin/test_engine_jobset.py).
    """
    if obj.get("kind") == "JobSet":
        for replicated in obj["spec"]["replicatedJobs"]:
            job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": replicated["name"]}}
            assert_schema_valid({**job, "spec": replicated["template"]["spec"]})
        return
    for version in K8S_VERSIONS:
        kubernetes_validate.validate(obj, version, strict=True)


# --- ClusterControllers and what waits for it (shared by their tests and WorkloadQueue's) -------------


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, dict[str, str]]]:
    """The CRDs the mocked cluster serves, with their annotations (empty: a bare cluster)."""
    crds: dict[str, dict[str, str]] = {}
    monkeypatch.setattr(detection, "installed_crds", lambda kubeconfig: crds)
    yield crds


@pytest.fixture
def notes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    said: list[str] = []
    monkeypatch.setattr(pulumi.log, "info", lambda message, *args, **kwargs: said.append(message))
    return said


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The ``depends_on`` each object of a component was created with, by resource name."""
    seen: dict[str, Any] = {}
    create = kube.create

    def recording(resource_name: str, manifest: Mapping[str, Any], opts: pulumi.ResourceOptions) -> Any:
        seen[resource_name] = opts.depends_on
        return create(resource_name, manifest, opts)

    monkeypatch.setattr(_shell.kube, "create", recording)
    return seen
