"""What of a chart's object the stack applies, and what it leaves to the controller the chart installs (pure).

:class:`~together_clusters.components.ClusterControllers` applies every object a chart renders with a forced
server-side apply (``pulumi.com/patchForce``, :data:`~together_clusters.components.kube.PATCH_FORCE_ANNOTATION`):
a ``pulumi up`` killed after applying an object but before recording it leaves the object owned by a field
manager no later run has, and an unforced rerun then fails with a conflict on every field it sets to another
value. Forced, the declared value wins. So the stack must not declare a value a controller writes, or the
next apply would take the controller's value away:

- **JobSet's webhook Secret** (``jobset-webhook-server-cert``): the chart renders it with every key empty
  (``ca.crt: ""``, ``tls.crt: ""``...), a placeholder the controller's certificate rotator fills with the CA
  and serving certificate it makes (an update by the field manager ``jobset``). Declared as rendered, a rerun
  that applies the Secret again (one a killed ``up`` applied but did not record) fails unforced with a
  conflict on those four keys (``conflicts with "jobset"``: issue 41, seen in CI, and on the twin); forced,
  it blanks them, and the rotator makes a new CA and certificate (the twin shows the Secret's certificate
  replaced): until the kubelet brings the pod's mounted Secret up to date (about a minute on a real
  cluster) the webhook serves a certificate the API server no longer trusts, and JobSet creates fail. So
  such a Secret is declared without its data: the Secret exists (the pod mounts it), and its keys are the
  rotator's alone, kept by any apply, forced or not.
- **The webhooks' ``caBundle``** (JobSet's and Kueue's webhook configurations, Kueue's CRDs' conversion
  webhook), which the rotators write: the charts declare none. Server-side apply merges ``clientConfig``
  field by field and the webhooks as a list keyed by name, so declaring ``clientConfig.service`` does not
  take ``caBundle``: a forced apply leaves it (tests/twin/test_engine_chart_rerun.py shows both).
- **Kueue's webhook Secret** is rendered with no data at all: nothing to leave out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DATA_FIELDS = ("data", "stringData")
"""A Secret's fields of values."""


def controller_written(kind: str, props: Mapping[str, Any]) -> tuple[str, ...]:
    """The fields of a rendered object (its values known) to leave out of what the stack declares, as its
    controller writes them (see the module): a Secret's data when every declared value is empty."""
    if kind != "Secret":
        return ()
    declared = [value for field in DATA_FIELDS for value in (props.get(field) or {}).values()]
    return DATA_FIELDS if declared and not any(declared) else ()
