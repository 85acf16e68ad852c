"""The credentials of one emulated cluster's control plane: a CA, the API server's serving certificate,
the service-account signing key and the bearer tokens, written as files the control plane reads.

EC P-256 keys keep this quick (milliseconds), so a cluster's kubeconfig can be final the moment the cluster is
created, before its control plane has started.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

# The in-cluster address of the `kubernetes` Service (the first address of the service range).
SERVICE_CLUSTER_IP_RANGE = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"
_VALIDITY = datetime.timedelta(days=3650)
_SERVING_NAMES = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
# Users of the static token file: the cluster's admin (the API's kubeconfig) and the control plane's own
# components, each with its own identity; all in system:masters, as a cluster's first admin is.
COMPONENTS = ("kube-controller-manager", "kube-scheduler", "kwok", "together-platform")
# Components installed into the cluster rather than part of it: no group, only what RBAC grants them.
RBAC_COMPONENTS = ("jobset-controller-manager",)


@dataclass(frozen=True)
class Files:
    """Where one control plane's credentials live (all inside its data directory)."""

    directory: Path

    @property
    def ca_cert(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def serving_cert(self) -> Path:
        return self.directory / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.directory / "apiserver.key"

    @property
    def service_account_key(self) -> Path:
        return self.directory / "sa.key"

    @property
    def service_account_public_key(self) -> Path:
        return self.directory / "sa.pub"

    @property
    def token_file(self) -> Path:
        return self.directory / "tokens.csv"

    def component_token(self, component: str) -> str:
        """The bearer token of one of :data:`COMPONENTS` or :data:`RBAC_COMPONENTS` (read from the token file)."""
        for line in self.token_file.read_text().splitlines():
            token, user, *_ = line.split(",")
            if user == f"system:{component}":
                return token
        raise KeyError(component)

    def ca_data(self) -> str:
        """The CA certificate, base64 as a kubeconfig's ``certificate-authority-data`` holds it."""
        return base64.b64encode(self.ca_cert.read_bytes()).decode()


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name | None,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer or name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    else:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(n) for n in _SERVING_NAMES]
                + [x509.IPAddress(ipaddress.ip_address(a)) for a in ("127.0.0.1", KUBERNETES_SERVICE_IP)]
            ),
            critical=False,
        ).add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def create(directory: Path, cluster_name: str, admin_token: str) -> Files:
    """Write a new set of credentials into ``directory``; the admin authenticates with ``admin_token``."""
    directory.mkdir(parents=True, exist_ok=True)
    files = Files(directory)
    ca_key = _key()
    ca = _certificate(f"{cluster_name}-ca", ca_key, None, ca_key, ca=True)
    serving_key = _key()
    serving = _certificate("kube-apiserver", serving_key, ca.subject, ca_key, ca=False)
    sa_key = _key()
    _write(files.ca_cert, ca.public_bytes(serialization.Encoding.PEM))
    _write(files.serving_cert, serving.public_bytes(serialization.Encoding.PEM))
    _write(files.serving_key, _pem_key(serving_key))
    _write(files.service_account_key, _pem_key(sa_key))
    _write(
        files.service_account_public_key,
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    )
    lines = [f'{admin_token},{cluster_name}-admin,{cluster_name}-admin,"system:masters"']
    lines += [f'{secrets.token_hex(24)},system:{c},{c},"system:masters"' for c in COMPONENTS]
    _write(files.token_file, ("\n".join(lines) + "\n").encode())
    add_rbac_components(files)
    return files


def add_rbac_components(files: Files) -> None:
    """Give each of :data:`RBAC_COMPONENTS` a token (kept when present: data from an older twin gains them)."""
    text = files.token_file.read_text()
    users = {line.split(",")[1] for line in text.splitlines() if line}
    missing = [c for c in RBAC_COMPONENTS if f"system:{c}" not in users]
    if missing:
        text += "".join(f"{secrets.token_hex(24)},system:{c},{c}\n" for c in missing)
        _write(files.token_file, text.encode())


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    path.chmod(0o600)
