"""A small client of the Kubernetes API on the standard library: bearer token, the cluster's CA, JSON.

The dispatcher reads the manager as its pod's ServiceAccount (the token file the kubelet keeps fresh, read
again for each request, since projected tokens expire) and each worker with a token kubeconfig of a read-only
ServiceAccount there (JSON, whose first cluster and user are read). Errors carry the status and the API
server's message, never the token.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from together_clusters.errors import DispatchRequestError

REQUEST_TIMEOUT_SECONDS = 10.0
WATCH_SECONDS = 300
"""How long the API server keeps one watch open (``timeoutSeconds``); the dispatcher then starts another."""
APPLY_PATCH = "application/apply-patch+yaml"


@dataclass(frozen=True)
class Token:
    """A bearer token: ``value`` as given, or ``file`` read again at each request (a pod's projected token,
    which the kubelet renews before it expires)."""

    value: str | None = None
    file: Path | None = None

    def read(self) -> str:
        if self.value is not None:
            return self.value
        if self.file is None:
            raise ValueError("a Token needs a value or a file")
        return self.file.read_text().strip()


class KubeClient:
    """One API server: ``server`` (``https://host:port``), a token source and the CA that signed its
    certificate (PEM)."""

    def __init__(self, server: str, token: Token, ca_pem: str) -> None:
        self.server = server.rstrip("/")
        self._token = token
        self._tls = ssl.create_default_context(cadata=ca_pem)

    @classmethod
    def in_cluster(cls, host: str, port: str, account_dir: Path) -> KubeClient:
        """The pod's own API server, as its ServiceAccount (``account_dir`` holds ``token`` and ``ca.crt``)."""
        server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
        return cls(server, Token(file=account_dir / "token"), (account_dir / "ca.crt").read_text())

    @classmethod
    def from_kubeconfig(cls, text: str) -> KubeClient:
        """A token kubeconfig in JSON (its first cluster: ``server``, ``certificate-authority-data``; its
        first user: ``token``)."""
        config = json.loads(text)
        cluster = config["clusters"][0]["cluster"]
        token = str(config["users"][0]["user"]["token"])
        ca_pem = base64.b64decode(cluster["certificate-authority-data"]).decode()
        return cls(str(cluster["server"]), Token(value=token), ca_pem)

    def get(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        return self._request("GET", path + query)

    def apply(self, path: str, body: Mapping[str, Any], field_manager: str) -> dict[str, Any]:
        """A forced server-side apply of ``body`` under ``field_manager``."""
        query = urllib.parse.urlencode({"fieldManager": field_manager, "force": "true"})
        return self._request("PATCH", f"{path}?{query}", json.dumps(body).encode(), APPLY_PATCH)

    def watch(self, path: str) -> Iterator[dict[str, Any]]:
        """The events of a watch of the collection at ``path`` (``{"type": ..., "object": ...}``), the objects
        that exist first (as ``ADDED``), until the API server ends it (:data:`WATCH_SECONDS`); a failure
        raises :class:`DispatchRequestError` as :meth:`get` does, ``ERROR`` events included."""
        query = urllib.parse.urlencode({"watch": "true", "timeoutSeconds": str(WATCH_SECONDS)})
        request = self._authorized("GET", f"{path}?{query}")
        try:
            # The socket's timeout covers the server's own and a quiet collection (no event for a while).
            with urllib.request.urlopen(request, timeout=WATCH_SECONDS + 30, context=self._tls) as reply:
                for line in reply:
                    if not line.strip():
                        continue
                    event = dict(json.loads(line))
                    if event.get("type") == "ERROR":
                        status = event.get("object") or {}
                        raise DispatchRequestError(int(status.get("code") or 0), str(status.get("message")))
                    yield event
        except urllib.error.HTTPError as error:
            raise DispatchRequestError(error.code, _message(error)) from None
        except (OSError, ValueError) as error:
            raise DispatchRequestError(
                0, f"watch {self.server}{path}: {type(error).__name__}: {error}"
            ) from None

    def _authorized(
        self, method: str, path: str, body: bytes | None = None, content_type: str | None = None
    ) -> urllib.request.Request:
        """A request to ``path`` with the token (read now) and JSON accepted."""
        request = urllib.request.Request(self.server + path, data=body, method=method)
        request.add_header("Authorization", f"Bearer {self._token.read()}")
        request.add_header("Accept", "application/json")
        if content_type:
            request.add_header("Content-Type", content_type)
        return request

    def _request(
        self, method: str, path: str, body: bytes | None = None, content_type: str | None = None
    ) -> dict[str, Any]:
        request = self._authorized(method, path, body, content_type)
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_SECONDS, context=self._tls) as reply:
                return dict(json.loads(reply.read() or b"{}"))
        except urllib.error.HTTPError as error:
            raise DispatchRequestError(error.code, _message(error)) from None
        except (OSError, ValueError) as error:  # refused, timed out, TLS, a reply that is not JSON
            raise DispatchRequestError(
                0, f"{method} {self.server}{path.split('?')[0]}: {type(error).__name__}: {error}"
            ) from None


def _message(error: urllib.error.HTTPError) -> str:
    """The API server's ``Status`` message, else the HTTP reason."""
    try:
        return str(json.loads(error.read()).get("message") or error.reason)
    except (OSError, ValueError, AttributeError):
        return str(error.reason)
