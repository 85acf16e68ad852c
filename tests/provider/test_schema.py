"""``provider/schema.py`` is the one list of the Cluster's fields: the hand-written, typed surface a user
reads in an IDE (``ClusterArgs`` and the ``Cluster`` output annotations) agrees with it field for field."""

from __future__ import annotations

import dataclasses
import inspect

from together_clusters.provider import Cluster, ClusterArgs
from together_clusters.provider.schema import FIELDS, OUTPUT_NAMES


def test_cluster_args_are_the_schema_inputs_in_order():
    assert [f.name for f in dataclasses.fields(ClusterArgs)] == list(FIELDS)


def test_cluster_args_required_and_defaults_are_the_schemas():
    for arg in dataclasses.fields(ClusterArgs):
        spec = FIELDS[arg.name]
        if spec.required:
            assert arg.default is dataclasses.MISSING, f"{arg.name} is required in the schema"
        else:
            assert arg.default is not dataclasses.MISSING, f"{arg.name} is optional in the schema"
            assert arg.default == spec.default, (
                f"{arg.name}: ClusterArgs {arg.default!r}, schema {spec.default!r}"
            )


def test_every_output_is_annotated_on_cluster_and_every_annotation_is_a_field():
    annotated = set(inspect.get_annotations(Cluster))
    assert set(OUTPUT_NAMES) - annotated == set(), "outputs without an annotation on Cluster"
    assert annotated - set(OUTPUT_NAMES) - set(FIELDS) == set(), "annotations on Cluster that are no field"


def test_cluster_docstring_names_every_output():
    doc = Cluster.__doc__ or ""
    assert [name for name in OUTPUT_NAMES if f"``{name}``" not in doc] == []
