"""Development certificates: a throw-away CA and a server certificate signed by it.

Built with ``cryptography`` (X.509 per RFC 5280). For development and tests only; production
mounts certificates issued by the operator's CA.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class DevCertificates:
    """Paths of the PEM files written by :func:`write_dev_certificates`."""

    ca_certificate: Path
    ca_private_key: Path
    certificate: Path
    private_key: Path


def _write_private(path: Path, data: bytes) -> None:
    # Created 0600 from the start so the key is never readable by others, even briefly.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.chmod(path, 0o600)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _san(names: list[str]) -> x509.SubjectAlternativeName:
    entries: list[x509.GeneralName] = []
    for name in dict.fromkeys(names):  # keep order, drop duplicates
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            entries.append(x509.DNSName(name))
    return x509.SubjectAlternativeName(entries)


def write_dev_certificates(
    out_dir: Path, hostnames: list[str] | None = None, *, days: int = 365
) -> DevCertificates:
    """Write ``ca.crt``/``ca.key`` and ``server.crt``/``server.key`` (ECDSA P-256) into ``out_dir``.

    The server certificate's SANs are ``localhost``, ``127.0.0.1``, ``::1`` and ``hostnames``
    (DNS names or IP addresses). Private keys are written with mode 0600. An existing CA in
    ``out_dir`` is reused so that clients that already trust it keep working.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = DevCertificates(
        out_dir / "ca.crt", out_dir / "ca.key", out_dir / "server.crt", out_dir / "server.key"
    )
    ca_cert, ca_key = _load_or_create_ca(paths, days)
    names = ["localhost", "127.0.0.1", "::1", *(hostnames or [])]
    _issue(ca_cert, ca_key, names[0], ExtendedKeyUsageOID.SERVER_AUTH, days,
           paths.certificate, paths.private_key, san=_san(names))
    return paths


def write_client_certificate(out_dir: Path, name: str, *, days: int = 365) -> tuple[Path, Path]:
    """Issue ``<name>.crt``/``<name>.key`` in ``out_dir`` for the ``mtls`` provider: subject
    ``CN=<name>``, client-authentication use, signed by the development CA of ``out_dir``
    (created if missing). Returns the certificate and key paths; the key is mode 0600."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = DevCertificates(
        out_dir / "ca.crt", out_dir / "ca.key", out_dir / "server.crt", out_dir / "server.key"
    )
    ca_cert, ca_key = _load_or_create_ca(paths, days)
    cert, key = out_dir / f"{name}.crt", out_dir / f"{name}.key"
    _issue(ca_cert, ca_key, name, ExtendedKeyUsageOID.CLIENT_AUTH, days, cert, key)
    return cert, key


def _load_or_create_ca(paths: DevCertificates, days: int):
    if paths.ca_certificate.exists() and paths.ca_private_key.exists():
        ca_cert = x509.load_pem_x509_certificate(paths.ca_certificate.read_bytes())
        ca_key = serialization.load_pem_private_key(paths.ca_private_key.read_bytes(), None)
        return ca_cert, ca_key
    now = dt.datetime.now(dt.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "HMS Gateway development CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days * 5))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    _write_private(paths.ca_private_key, _key_pem(ca_key))
    paths.ca_certificate.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    return ca_cert, ca_key


def _issue(ca_cert, ca_key, common_name: str, usage, days: int, cert_path: Path, key_path: Path,
           san: x509.SubjectAlternativeName | None = None) -> None:
    now = dt.datetime.now(dt.timezone.utc)
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()), False
        )
    )
    if san is not None:
        builder = builder.add_extension(san, critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    _write_private(key_path, _key_pem(key))
    cert_path.write_bytes(
        cert.public_bytes(serialization.Encoding.PEM)
        + ca_cert.public_bytes(serialization.Encoding.PEM)  # full chain for the peer
    )


def certificate_not_after(path: Path) -> dt.datetime:
    """Expiry (UTC) of the first certificate in a PEM file; raises ``ValueError`` if unreadable."""
    return x509.load_pem_x509_certificate(path.read_bytes()).not_valid_after_utc
