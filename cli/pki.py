"""The cluster's certificates: a CA and the apiserver's serving certificate, for its HTTPS REST API.

``kplane up`` (and ``kplane tokens``, which compose.yaml runs first) makes them once under
``<data-dir>/pki/``: ``ca.crt``/``ca.key`` (a self-signed CA, ten years) and
``apiserver.crt``/``apiserver.key`` signed by it for 127.0.0.1, localhost and ``apiserver`` (the
compose service name), so kubectl and the official clients verify the server with the CA that
the kubeconfig carries. Keys are ECDSA P-256; files are written atomically, keys mode 0600.
An existing serving certificate that lacks a wanted name is made again with the same CA.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

PKI_DIR = "pki"
# The apiservers by their compose names and their one DNS name (cli/topology.py), and as Kubernetes
# names its service.
SERVING_NAMES = ("localhost", "apiserver", *(f"apiserver-{i}" for i in range(2, 6)), "apiservers", "kubernetes",
                 "kubernetes.default", "kubernetes.default.svc")
SERVING_IPS = ("127.0.0.1",)
_VALID_DAYS = 3650


@dataclass(frozen=True)
class Pki:
    dir: Path

    @property
    def ca_cert(self) -> Path:
        return self.dir / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.dir / "ca.key"

    @property
    def cert(self) -> Path:
        return self.dir / "apiserver.crt"

    @property
    def key(self) -> Path:
        return self.dir / "apiserver.key"


def _write(path: Path, data: bytes, mode: int) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _make_ca(p: Pki) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kplane-ca")])
    now = _now()
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=_VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    _write(p.ca_key, _key_pem(key), 0o600)
    _write(p.ca_cert, cert.public_bytes(serialization.Encoding.PEM), 0o644)


def _covers(cert_path: Path) -> bool:
    """Whether the serving certificate names every wanted DNS name and IP address."""
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (OSError, ValueError, x509.ExtensionNotFound):
        return False
    names = set(san.get_values_for_type(x509.DNSName))
    ips = {str(i) for i in san.get_values_for_type(x509.IPAddress)}
    return set(SERVING_NAMES) <= names and set(SERVING_IPS) <= ips


def _make_serving(p: Pki) -> None:
    ca_key = serialization.load_pem_private_key(p.ca_key.read_bytes(), password=None)
    ca_cert = x509.load_pem_x509_certificate(p.ca_cert.read_bytes())
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{p.ca_key} is not an ECDSA key")
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in SERVING_NAMES]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in SERVING_IPS]
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
            .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=_VALID_DAYS))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False, key_cert_sign=False,
                                         crl_sign=False, content_commitment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    _write(p.key, _key_pem(key), 0o600)
    _write(p.cert, cert.public_bytes(serialization.Encoding.PEM), 0o644)


def ensure(data_dir: Path | str) -> Pki:
    """The cluster's PKI under ``<data_dir>/pki``, made if missing (never replaced if present)."""
    p = Pki(Path(data_dir) / PKI_DIR)
    p.dir.mkdir(parents=True, exist_ok=True)
    if not (p.ca_cert.exists() and p.ca_key.exists()):
        _make_ca(p)
        for f in (p.cert, p.key):
            f.unlink(missing_ok=True)  # signed by a CA that is gone
    if not (p.cert.exists() and p.key.exists()) or not _covers(p.cert):
        _make_serving(p)
    return p
