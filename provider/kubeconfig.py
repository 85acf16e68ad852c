"""The cluster's kubeconfig as the API sends it (base64) turned into the text a Kubernetes client loads."""

from __future__ import annotations

import base64
import binascii


def kubeconfig_text(kube_config: str | None) -> str | None:
    """The kubeconfig document held by a cluster's ``kube_config`` field.

    The API sends it base64-encoded (the official CLI decodes it: together 3.1.1,
    ``lib/cli/api/clusters/get_credentials.py``). A plain YAML document is taken as it is: YAML always
    holds a ``:``, outside the base64 alphabet, so the two cannot be confused. Line breaks in the base64
    (as ``base64 -w 76`` writes it) are ignored.
    """
    if not kube_config:
        return kube_config
    try:
        return base64.b64decode("".join(kube_config.split()), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return kube_config
