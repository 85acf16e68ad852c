"""The ``together`` package schema (``provider/schema.json``) is the field tables of ``provider/schema.py`` in
Pulumi's form: committed, in step with the tables and the hand-written ``ClusterArgs``/``VolumeArgs``, and
read by Pulumi's own schema binder (the engine's ``pulumi package info`` and ``get-schema``) as we mean it."""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import subprocess
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import pytest

from tests import _engine
from together_clusters.components.args import BatchJobArgs, PodSettings, SharedVolume
from together_clusters.platform import ComputeClass
from together_clusters.provider import ClusterArgs, VolumeArgs, nested_inputs, resource, vocabulary
from together_clusters.provider.package_schema import (
    BATCH_JOB_TOKEN,
    CLUSTER_CONTROLLERS_TOKEN,
    CLUSTER_TOKEN,
    REMEDIATION_GATE_TOKEN,
    SCHEMA_FILE,
    VOLUME_TOKEN,
    annotation_type,
    camel,
    main,
    package_schema,
)
from together_clusters.provider.schema import (
    FIELDS,
    OUTPUTS,
    VOLUME_FIELDS,
    VOLUME_OUTPUTS,
    FieldSpec,
    OnChange,
)

NAMESPACE = {**vars(vocabulary), **vars(nested_inputs)}
RESOURCES = {CLUSTER_TOKEN: (FIELDS, OUTPUTS), VOLUME_TOKEN: (VOLUME_FIELDS, VOLUME_OUTPUTS)}


def committed() -> dict[str, Any]:
    return json.loads(SCHEMA_FILE.read_text())


def test_the_committed_schema_is_the_one_the_tables_write(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--check"]) == 0, capsys.readouterr().err


def test_the_check_names_the_command_that_rewrites_a_stale_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "schema.json"
    stale.write_text(SCHEMA_FILE.read_text().replace('"numGpus"', '"numGPUs"'))
    monkeypatch.setattr("together_clusters.provider.package_schema.SCHEMA_FILE", stale)
    assert main(["--check"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "package_schema --write" in err


def test_camel_case_names_are_the_ones_pulumi_packages_use() -> None:
    assert [camel(n) for n in ("cluster_name", "num_preemptible_gpus", "kube_config", "region")] == [
        "clusterName",
        "numPreemptibleGpus",
        "kubeConfig",
        "region",
    ]


@pytest.mark.parametrize("token", list(RESOURCES))
def test_every_field_and_output_is_in_the_schema_under_its_camel_case_name(token: str) -> None:
    fields, outputs = RESOURCES[token]
    spec = committed()["resources"][token]
    assert list(spec["inputProperties"]) == [camel(n) for n in fields]
    assert set(spec["properties"]) == {camel(n) for n in (*fields, *outputs)}
    assert spec["requiredInputs"] == [camel(n) for n, f in fields.items() if f.required]


@pytest.mark.parametrize("token", list(RESOURCES))
def test_the_fields_a_change_replaces_are_the_schemas_replace_on_changes(token: str) -> None:
    fields, _ = RESOURCES[token]
    inputs = committed()["resources"][token]["inputProperties"]
    marked = {name for name, prop in inputs.items() if prop.get("replaceOnChanges")}
    assert marked == {camel(n) for n, f in fields.items() if f.on_change is OnChange.REPLACE}


def test_the_kubeconfig_and_the_api_key_are_secret_and_nothing_else_is() -> None:
    schema = committed()
    secret_outputs = {
        (token, name)
        for token, spec in schema["resources"].items()
        for name, prop in spec["properties"].items()
        if prop.get("secret")
    }
    assert secret_outputs == {(CLUSTER_TOKEN, "kubeConfig")}
    assert schema["config"]["variables"]["apiKey"]["secret"] is True
    assert schema["provider"]["inputProperties"]["apiKey"]["secret"] is True


def test_the_remediation_gates_api_key_and_the_controllers_kubeconfig_are_the_secret_inputs_and_the_cluster_id_a_string() -> (
    None
):
    schema = committed()
    secret_inputs = {
        (token, name)
        for token, spec in schema["resources"].items()
        for name, prop in spec["inputProperties"].items()
        if prop.get("secret")
    }
    # Every SDK sends a secret input as a secret, whatever the program gave it (a YAML literal too).
    assert secret_inputs == {(REMEDIATION_GATE_TOKEN, "apiKey"), (CLUSTER_CONTROLLERS_TOKEN, "kubeconfig")}
    kubeconfig = schema["resources"][CLUSTER_CONTROLLERS_TOKEN]["inputProperties"]["kubeconfig"]
    assert kubeconfig["type"] == "string"  # a Cluster's kubeConfig, an output
    gate = schema["resources"][REMEDIATION_GATE_TOKEN]
    assert gate["isComponent"] is True
    assert gate["inputProperties"]["clusterId"]["type"] == "string"  # a Cluster's clusterId, an output
    assert gate["inputProperties"]["apiKey"]["type"] == "string"
    assert set(gate["requiredInputs"]) == {"clusterId", "modes", "image"}
    assert gate["inputProperties"]["modes"] == {"type": "array", "items": {"type": "string"}}


def test_the_apis_enumerations_are_enum_types_with_the_sdks_values() -> None:
    types = committed()["types"]
    for name, values in {
        "GpuType": vocabulary.GPU_TYPES,
        "BillingType": vocabulary.BILLING_TYPES,
        "ClusterType": vocabulary.CLUSTER_TYPES,
        "LoadBalancer": vocabulary.LOAD_BALANCERS,
    }.items():
        assert [v["value"] for v in types[f"together:index:{name}"]["enum"]] == list(values), name


def _compatible(annotated: Any, wire_type: Any) -> bool:
    """The hand-written annotation allows what the table declares (an enumeration may be annotated ``str``)."""
    if get_origin(wire_type) is Literal:
        return annotated in (wire_type, str)
    if get_origin(wire_type) is list:
        return get_origin(annotated) is list and _compatible(get_args(annotated)[0], get_args(wire_type)[0])
    return annotated is wire_type or (wire_type is float and annotated is int)


@pytest.mark.parametrize(("args", "fields"), [(ClusterArgs, FIELDS), (VolumeArgs, VOLUME_FIELDS)])
def test_the_args_dataclasses_annotate_the_types_the_table_declares(
    args: type, fields: dict[str, FieldSpec]
) -> None:
    namespace = {**NAMESPACE, **vars(resource)}
    wrong = {
        f.name: (f.type, fields[f.name].wire_type)
        for f in dataclasses.fields(args)
        if not _compatible(annotation_type(str(f.type), namespace), fields[f.name].wire_type)
    }
    assert wrong == {}


@pytest.mark.parametrize(("cls", "outputs"), [(resource.Cluster, OUTPUTS), (resource.Volume, VOLUME_OUTPUTS)])
def test_the_output_annotations_are_the_types_the_table_declares(cls: type, outputs: dict[str, Any]) -> None:
    annotations = inspect.get_annotations(cls)
    wrong = {}
    for name, spec in outputs.items():
        if name not in annotations:
            continue  # an output a resource does not annotate (Volume's target outputs): test_schema's concern
        match = re.fullmatch(r"pulumi\.Output\[(.*)\]", str(annotations[name]))
        assert match, (name, annotations[name])
        if annotation_type(match.group(1), NAMESPACE) is not spec.wire_type:
            wrong[name] = (annotations[name], spec.wire_type)
    assert wrong == {}


def test_an_annotation_of_a_form_the_schema_does_not_know_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"'Mapping\[str, int\]' is no type"):
        annotation_type("pulumi.Input[Mapping[str, int]] | None", NAMESPACE)


# --- Pulumi's own binder as the oracle -------------------------------------------------------------------


def _pulumi(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    _engine.require_engine()
    return subprocess.run(
        [str(_engine.PULUMI), *args],
        cwd=workdir,
        env=_engine.engine_env(workdir),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.engine
@pytest.mark.parametrize("token", list(RESOURCES))
def test_pulumis_binder_reads_each_input_with_its_type_and_requiredness(token: str, tmp_path: Path) -> None:
    fields, _ = RESOURCES[token]
    proc = _pulumi(tmp_path, "package", "info", str(SCHEMA_FILE), "--resource", token.rsplit(":", 1)[-1])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    inputs_block = proc.stdout.split("Inputs:", 1)[1].split("Inputs marked", 1)[0]
    listed = dict(re.findall(r"^ - (\w+) \(([^)]*)\)", inputs_block, flags=re.MULTILINE))
    assert set(listed) == {camel(n) for n in fields}
    required = {name for name, kind in listed.items() if kind.endswith("*")}
    assert required == {camel(n) for n, f in fields.items() if f.required}
    kinds = {"integer": int, "number": float, "boolean": bool, "string": str}
    for name, spec in fields.items():
        if spec.wire_type in kinds.values():
            assert listed[camel(name)].rstrip("*") == next(k for k, t in kinds.items() if t is spec.wire_type)


@pytest.mark.engine
def test_pulumis_binder_keeps_every_replace_on_changes_secret_and_default_we_wrote(tmp_path: Path) -> None:
    proc = _pulumi(tmp_path, "package", "get-schema", str(SCHEMA_FILE))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    bound = json.loads(proc.stdout)
    ours = package_schema()
    for token in RESOURCES:
        for section in ("inputProperties", "properties"):
            for name, prop in ours["resources"][token][section].items():
                kept = bound["resources"][token][section][name]
                # A key the binder does not know (a misspelt "replaceOnChange") is dropped: none may be.
                assert {key: kept.get(key) for key in prop} == prop, (token, section, name)
    assert bound["types"] == ours["types"]
    assert bound["config"] == ours["config"]


def test_the_batch_job_is_a_component_whose_inputs_are_its_python_args_in_camel_case() -> None:
    spec = committed()["resources"][BATCH_JOB_TOKEN]
    assert spec["isComponent"] is True
    own = {f.name for f in dataclasses.fields(BatchJobArgs)}  # the deprecated flat keywords are no fields
    assert set(spec["inputProperties"]) == {camel(name) for name in own}
    assert spec["requiredInputs"] == ["container"]
    assert spec["inputProperties"]["pod"] == {"$ref": "#/types/together:index:PodSettings"}
    types = committed()["types"]
    assert set(types["together:index:PodSettings"]["properties"]) == {
        camel(f.name) for f in dataclasses.fields(PodSettings)
    }
    # One checkpoint object with exactly one of the Python classes; the claim's type is not the cluster's volume.
    checkpoint = types["together:index:Checkpoint"]["properties"]
    assert checkpoint["sharedVolume"] == {"$ref": "#/types/together:index:CheckpointVolume"}
    assert set(types["together:index:CheckpointVolume"]["properties"]) == {
        camel(f.name) for f in dataclasses.fields(SharedVolume)
    }
    assert [v["value"] for v in types["together:index:ComputeClass"]["enum"]] == [
        c.value for c in ComputeClass
    ]
