"""The manager's credentials for a fleet worker: its ServiceAccount token, read from the worker with the
worker's admin kubeconfig while the program runs, and made into the kubeconfig MultiKueue reads.

The admin kubeconfig is used here, in the program's memory, and nowhere else: it is neither stored nor
logged, and what leaves this module (the worker's fleet kubeconfig) is wrapped as a Pulumi secret by the
caller. The token is the one the worker's API server puts in a ``kubernetes.io/service-account-token``
Secret: it does not expire, and it is revoked by deleting that Secret (``pulumi up --replace`` of it mints a
new one and the manager's copy follows in the same update).
"""

from __future__ import annotations

import base64
import time
from typing import Any

import yaml

from together_clusters.errors import FleetCredentialsError, MissingExtraError
from together_clusters.provider.kubeconfig import kubeconfig_text

from .manifests.fleet_queue import KUEUE_NAMESPACE, api_server_of, worker_kubeconfig

REQUEST_TIMEOUT_SECONDS = 15
TOKEN_WAIT_SECONDS = 120.0


def fleet_kubeconfig(worker: str, admin_kubeconfig: str, token_secret: str) -> str:
    """The kubeconfig the manager reaches ``worker`` with: the token and CA of ``token_secret`` (a
    service-account-token Secret in Kueue's namespace), and the worker's API server."""
    text = kubeconfig_text(admin_kubeconfig) or ""
    token, ca_data = _read_token(worker, text, token_secret)
    return worker_kubeconfig(worker, api_server_of(text), ca_data, token)


def _read_token(worker: str, admin_kubeconfig: str, secret: str) -> tuple[str, str]:
    """The token and base64 CA the API server wrote into ``secret``, waiting for it to be filled."""
    try:
        from kubernetes import client, config
        from kubernetes.client.exceptions import ApiException
    except ModuleNotFoundError as error:
        raise MissingExtraError(
            "FleetQueue (reading a worker's token)", "drill", "together-gpu-clusters", error.name
        ) from error
    api = config.new_client_from_config_dict(yaml.safe_load(admin_kubeconfig))
    deadline = time.monotonic() + TOKEN_WAIT_SECONDS
    last = "it was not filled in yet"
    with api:
        core = client.CoreV1Api(api)
        while True:
            try:
                found: Any = core.read_namespaced_secret(
                    secret, KUEUE_NAMESPACE, _request_timeout=REQUEST_TIMEOUT_SECONDS
                )
                data = found.data or {}
                if data.get("token") and data.get("ca.crt"):
                    return base64.b64decode(data["token"]).decode(), str(data["ca.crt"])
            except ApiException as error:
                last = f"the API server answered {error.status} {error.reason}"
            except Exception as error:  # connection refused, TLS: the worker may still be starting
                last = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
            if time.monotonic() >= deadline:
                raise FleetCredentialsError(
                    f"worker {worker!r}: the token of Secret {KUEUE_NAMESPACE}/{secret} could not be read after "
                    f"{TOKEN_WAIT_SECONDS:g}s ({last}); check that the worker's API server answers and run "
                    "pulumi up again"
                )
            time.sleep(1.0)
