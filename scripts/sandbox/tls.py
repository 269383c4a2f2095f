"""The stand-in's certificate, made at start with ``cryptography``: self-signed, for the loopback names it
serves (``127.0.0.1``, ``::1``, ``localhost``), valid for a week.

The browser is told to trust exactly this certificate's key, by the SHA-256 of its SubjectPublicKeyInfo
(Chromium's ``--ignore-certificate-errors-spki-list``; the service's ``COMMUNITY_API_BROWSER_TRUSTED_SPKI``):
never every certificate. Python clients (tests, the demo) verify against the certificate file itself.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_FOR = dt.timedelta(days=7)


@dataclass(frozen=True)
class Certificate:
    cert_path: Path
    key_path: Path
    spki: str  # base64 of the SHA-256 of the certificate's SubjectPublicKeyInfo


def spki_hash(certificate: x509.Certificate) -> str:
    info = certificate.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.b64encode(hashlib.sha256(info).digest()).decode("ascii")


def make_certificate(
    folder: Path,
    dns_names: tuple[str, ...] = ("localhost",),
    stem: str = "sandbox",
    common_name: str = "community-api stand-in platform",
) -> Certificate:
    """A new key and a self-signed certificate for ``dns_names`` and the loopback addresses, written to
    ``folder`` as ``<stem>-cert.pem`` and ``<stem>-key.pem`` (key 0600)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = dt.datetime.now(dt.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALID_FOR)
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    *(x509.DNSName(dns_name) for dns_name in dns_names),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    x509.IPAddress(ipaddress.ip_address("::1")),
                ]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = folder / f"{stem}-cert.pem", folder / f"{stem}-key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.touch(mode=0o600)
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return Certificate(cert_path, key_path, spki_hash(certificate))
