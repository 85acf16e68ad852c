"""Run in a fresh virtualenv by test_core_install: the native plugin's pieces on the pulumi SDK installed there
(the servicer it mends, the provider's schema and check, the wire through the SDK's own marshalling), as JSON."""

import asyncio
import json
from importlib import metadata

from pulumi.provider.experimental.property_value import Computed, PropertyValue
from pulumi.provider.experimental.provider import CheckRequest, GetSchemaRequest
from pulumi.runtime.rpc import UNKNOWN

from together_clusters.provider.native import serve
from together_clusters.provider.native.provider import TogetherProvider
from together_clusters.provider.native.wire import to_plain, to_wire

serve.install()
provider = TogetherProvider()
schema = json.loads(asyncio.run(provider.get_schema(GetSchemaRequest(0))).schema or "{}")
news = {
    "clusterName": PropertyValue("probe"),
    "region": PropertyValue("us-central-8"),
    "gpuType": PropertyValue("H100_SXM"),
    "numGpus": PropertyValue(0.0),
    "volumeId": PropertyValue(Computed()),
}
checked = asyncio.run(
    provider.check(CheckRequest("urn:pulumi:s::p::together:index:Cluster::c", {}, news, b""))
)
sent = PropertyValue.marshal_map(
    to_wire({"volume_id": UNKNOWN, "kube_config": "k", "num_gpus": 8}, ["kube_config"])
)
back = PropertyValue.unmarshal_map(sent)
print(
    json.dumps(
        {
            "pulumi": metadata.version("pulumi"),
            "package": metadata.version("together-gpu-clusters"),
            "schema_version": schema.get("version"),
            "failures": [f.property for f in checked.failures or ()],
            "round_trip": to_plain(back),
            "secret": back["kubeConfig"].is_secret,
        }
    )
)
