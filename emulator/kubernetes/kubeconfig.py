"""A cluster's Kubernetes API endpoint and the kubeconfig that reaches it (pure)."""

from __future__ import annotations

import yaml
from pydantic import BaseModel


class KubeApi(BaseModel):
    """Where a cluster's API server listens and the CA that signed its serving certificate."""

    server: str
    certificate_authority_data: str

    def kubeconfig(self, cluster_name: str, token: str) -> str:
        """A kubeconfig for the cluster's admin, authenticating with the bearer ``token``."""
        return render(cluster_name, self.server, self.certificate_authority_data, token)


def render(name: str, server: str, certificate_authority_data: str, token: str) -> str:
    """A one-context kubeconfig (YAML) with CA data and a bearer token."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": name,
                "cluster": {"server": server, "certificate-authority-data": certificate_authority_data},
            }
        ],
        "users": [{"name": f"{name}-admin", "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": f"{name}-admin"}}],
        "current-context": name,
    }
    return yaml.safe_dump(config, sort_keys=False)
