"""certs: what an operator checks with openssl — names, validity, chain, key modes."""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import stat

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

import certs
from certs.__main__ import main as certs_cli
from certs.inject import ca_bundle_patch
from certs.pki import build_ca, issue_certificate


def _load(path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return certs.generate(tmp_path_factory.mktemp("certs"), service="hooks", namespace="ops",
                          extra_sans=("webhook.example.com", "10.0.0.7"),
                          lifetime=dt.timedelta(days=30), ca_lifetime=dt.timedelta(days=90))


def test_writes_the_four_pem_files(generated):
    for name in ("ca.crt", "ca.key", "tls.crt", "tls.key"):
        assert (generated.out_dir / name).is_file()
    assert generated.tls_cert.name == "tls.crt" and generated.ca_cert.name == "ca.crt"


def test_private_keys_are_readable_by_owner_only(generated):
    for key in (generated.ca_key, generated.tls_key):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(generated.tls_cert.stat().st_mode) == 0o644


def test_serving_cert_names(generated):
    cert = _load(generated.tls_cert)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [
        "hooks.ops.svc", "hooks.ops.svc.cluster.local", "localhost", "webhook.example.com",
    ]
    assert san.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("10.0.0.7"),
    ]
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in eku
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False


def test_default_names_are_the_service_of_the_manifests(tmp_path):
    paths = certs.generate(tmp_path)
    san = _load(paths.tls_cert).extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert "rollgate-webhook.rollgate-system.svc" in san.value.get_values_for_type(x509.DNSName)


def test_validity(generated):
    """Each for its own lifetime: the CA outlives the serving certificates it signs."""
    now = dt.datetime.now(dt.UTC)
    for path, days in ((generated.ca_cert, 90), (generated.tls_cert, 30)):
        cert = _load(path)
        assert cert.not_valid_before_utc <= now
        assert now + dt.timedelta(days=days - 1) < cert.not_valid_after_utc
        assert cert.not_valid_after_utc <= now + dt.timedelta(days=days, minutes=1)


def test_chain_verifies_against_the_ca(generated):
    ca = _load(generated.ca_cert)
    leaf = _load(generated.tls_cert)
    store = x509.verification.Store([ca])
    verifier = x509.verification.PolicyBuilder().store(store).build_server_verifier(
        x509.DNSName("hooks.ops.svc"))
    chain = verifier.verify(leaf, [])
    assert chain[-1] == ca
    ip_verifier = x509.verification.PolicyBuilder().store(store).build_server_verifier(
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    ip_verifier.verify(leaf, [])


def test_a_name_not_in_the_cert_does_not_verify(generated):
    store = x509.verification.Store([_load(generated.ca_cert)])
    verifier = x509.verification.PolicyBuilder().store(store).build_server_verifier(
        x509.DNSName("evil.example.com"))
    with pytest.raises(x509.verification.VerificationError):
        verifier.verify(_load(generated.tls_cert), [])


def test_ca_bundle_is_base64_of_the_ca_pem(generated):
    bundle = certs.ca_bundle(generated.ca_cert)
    assert base64.b64decode(bundle) == generated.ca_cert.read_bytes()


def test_ca_bundle_refuses_a_file_without_a_certificate(tmp_path):
    bogus = tmp_path / "ca.crt"
    bogus.write_text("not a certificate\n")
    with pytest.raises(ValueError, match="no PEM certificate"):
        certs.ca_bundle(bogus)


def test_reuse_ca_keeps_the_bundle_and_rotates_the_leaf(tmp_path):
    first = certs.generate(tmp_path)
    bundle, leaf = certs.ca_bundle(first.ca_cert), first.tls_cert.read_bytes()
    second = certs.generate(tmp_path, reuse_ca=True)
    assert certs.ca_bundle(second.ca_cert) == bundle
    assert second.tls_cert.read_bytes() != leaf
    store = x509.verification.Store([_load(second.ca_cert)])
    x509.verification.PolicyBuilder().store(store).build_server_verifier(
        x509.DNSName("localhost")).verify(_load(second.tls_cert), [])
    third = certs.generate(tmp_path)  # without reuse_ca: a new CA
    assert certs.ca_bundle(third.ca_cert) != bundle


def test_inject_patch_sets_the_bundle_on_every_webhook():
    ops = ca_bundle_patch(["validate-stages.rollgate.dev", "validate-rolloutmanagers.rollgate.dev"],
                          "QUJD")
    assert ops == [
        {"op": "test", "path": "/webhooks/0/name", "value": "validate-stages.rollgate.dev"},
        {"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": "QUJD"},
        {"op": "test", "path": "/webhooks/1/name",
         "value": "validate-rolloutmanagers.rollgate.dev"},
        {"op": "add", "path": "/webhooks/1/clientConfig/caBundle", "value": "QUJD"},
    ]


def test_cli_generate_and_bundle(tmp_path, capsys):
    assert certs_cli(["generate", "--out-dir", str(tmp_path), "--san", "hook.local"]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == [str(tmp_path / n) for n in ("ca.crt", "ca.key", "tls.crt", "tls.key")]
    assert certs_cli(["bundle", "--ca-file", str(tmp_path / "ca.crt")]) == 0
    assert capsys.readouterr().out.strip() == certs.ca_bundle(tmp_path / "ca.crt")


def test_issue_certificate_client_identity_is_subject_and_groups():
    ca, ca_key = build_ca(common_name="test-ca", lifetime=dt.timedelta(days=2))
    cert, _ = issue_certificate(
        ca, ca_key, common_name="system:serviceaccount:ops:hooks",
        organizations=["system:serviceaccounts", "system:serviceaccounts:ops"], client=True,
    )
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)] == [
        "system:serviceaccount:ops:hooks"]
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == [
        "system:serviceaccounts", "system:serviceaccounts:ops"]
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    with pytest.raises(x509.ExtensionNotFound):
        cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert cert.not_valid_after_utc <= ca.not_valid_after_utc  # never outlives its CA


def test_issue_certificate_needs_a_usage():
    ca, ca_key = build_ca(common_name="test-ca", lifetime=dt.timedelta(days=2))
    with pytest.raises(ValueError, match="server=True, client=True"):
        issue_certificate(ca, ca_key, common_name="nobody")


def test_tls_secret_carries_the_three_files_base64():
    from certs.secret import tls_secret

    files = {"tls.crt": b"C", "tls.key": b"K", "ca.crt": b"A"}
    secret = tls_secret(name="s", namespace="ns", files=files)
    assert secret["type"] == "kubernetes.io/tls"
    assert secret["metadata"]["namespace"] == "ns"
    assert {k: base64.b64decode(v) for k, v in secret["data"].items()} == files


def test_existing_ca_needs_all_three_keys():
    from types import SimpleNamespace

    from certs.secret import existing_ca

    full = {"tls.crt": "Qw==", "tls.key": "Sw==", "ca.crt": base64.b64encode(b"CA").decode()}
    assert existing_ca(SimpleNamespace(data=full)) == b"CA"
    assert existing_ca(SimpleNamespace(data={"tls.crt": "Qw==", "tls.key": "Sw=="})) is None
    assert existing_ca(SimpleNamespace(data=None)) is None
