"""Development certificates: SANs, chain, key permissions, TLS 1.2+ only."""

import ipaddress
import ssl
import stat

from cryptography import x509

from gateway.certs import certificate_not_after, write_dev_certificates
from gateway.config import TLSConfig
from gateway.tls import server_ssl_context


def test_server_certificate_has_sans_and_chains_to_ca(tmp_path):
    paths = write_dev_certificates(tmp_path, ["gateway-svc-external", "10.1.2.3"])
    cert = x509.load_pem_x509_certificate(paths.certificate.read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(san.get_values_for_type(x509.DNSName)) == {"localhost", "gateway-svc-external"}
    assert set(san.get_values_for_type(x509.IPAddress)) == {
        ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1"), ipaddress.ip_address("10.1.2.3")
    }
    ca = x509.load_pem_x509_certificate(paths.ca_certificate.read_bytes())
    cert.verify_directly_issued_by(ca)
    for key in (paths.private_key, paths.ca_private_key):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert certificate_not_after(paths.certificate) == cert.not_valid_after_utc


def test_existing_ca_is_reused(tmp_path):
    first = write_dev_certificates(tmp_path)
    ca_before = first.ca_certificate.read_bytes()
    second = write_dev_certificates(tmp_path, ["other"])
    assert second.ca_certificate.read_bytes() == ca_before
    cert = x509.load_pem_x509_certificate(second.certificate.read_bytes())
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca_before))


def test_server_context_refuses_old_tls(tmp_path):
    paths = write_dev_certificates(tmp_path)
    ctx = server_ssl_context(TLSConfig(certificate=paths.certificate, private_key=paths.private_key))
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    ctx13 = server_ssl_context(
        TLSConfig(certificate=paths.certificate, private_key=paths.private_key, minimum_version="1.3")
    )
    assert ctx13.minimum_version == ssl.TLSVersion.TLSv1_3


def test_client_certificate_for_mtls(tmp_path):
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    from gateway.certs import write_client_certificate

    server = write_dev_certificates(tmp_path)
    cert_path, key_path = write_client_certificate(tmp_path, "alice")
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "alice"
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(server.ca_certificate.read_bytes()))
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
