"""What ``rollgate certs renew`` does next, decided from what it observed (pure).

Three things must agree for an admission call to succeed: the caBundle of every
webhook entry, the CA that signed the serving certificate, and the certificate each
webhook pod really serves (the kubelet refreshes the mounted Secret about a minute
after it changed). Renewal changes them in the one order that never breaks a call
(docs/install.md "Certificate renewal"):

1. the CA is rotated when two thirds of its lifetime have passed (a new key pair in the
   CA Secret; nothing trusts or uses it yet);
2. the active CA joins every caBundle, next to the CAs already there and the CA of the
   served certificate; the run stops here, so the API server has loaded the bundle
   before anything serves a certificate of the new CA;
3. the serving certificate is re-issued by the active CA when it is missing, does not
   match its key or names, was signed by another CA, or has used two thirds of its
   lifetime;
4. the other CAs leave the bundles only once a TLS handshake to every ready webhook
   endpoint shows the serving Secret's certificate; until then the run waits.

Each run takes the first step that applies and observes again, so a run that stopped
anywhere (a failed write, a killed pod, a Helm upgrade in between) is finished by the
next, and a run with nothing to do writes nothing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

from certs.lifetimes import renewal_due


@dataclass(frozen=True, slots=True)
class CA:
    cert: x509.Certificate
    key: PrivateKeyTypes


@dataclass(frozen=True, slots=True)
class Serving:
    """The serving Secret: its certificate, whether ``tls.key`` is that certificate's
    key, and its ``ca.crt`` when that CA signed it."""

    cert: x509.Certificate
    key_matches: bool
    ca: x509.Certificate | None = None


@dataclass(frozen=True, slots=True)
class Observed:
    now: dt.datetime
    ca: CA | None
    serving: Serving | None
    # The certificates of each webhook entry's caBundle, one tuple per entry.
    bundles: tuple[tuple[x509.Certificate, ...], ...]
    # DER of the leaf each ready webhook endpoint presented; None where the handshake
    # failed. Probed only while a bundle holds a CA besides the active one.
    presented: tuple[bytes | None, ...]
    sans: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NewCA:
    why: str


@dataclass(frozen=True, slots=True)
class SetBundle:
    """Write ``certs`` as the caBundle of every webhook entry."""

    certs: tuple[x509.Certificate, ...]
    why: str
    # True when a CA joins: the run stops so the API server loads it first.
    adds: bool


@dataclass(frozen=True, slots=True)
class Issue:
    why: str


@dataclass(frozen=True, slots=True)
class Wait:
    why: str


Step = NewCA | SetBundle | Issue | Wait


def _der(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.DER)


def _unique(certs: Sequence[x509.Certificate]) -> tuple[x509.Certificate, ...]:
    seen: dict[bytes, x509.Certificate] = {}
    for cert in certs:
        seen.setdefault(_der(cert), cert)
    return tuple(seen.values())


def issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    """``ca`` signed ``cert`` (not merely a CA with the same name: a rotated CA keeps
    its subject)."""
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _sans(cert: x509.Certificate) -> tuple[str, ...]:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return ()
    names = [str(n) for n in ext.get_values_for_type(x509.DNSName)]
    names += [str(ip) for ip in ext.get_values_for_type(x509.IPAddress)]
    return tuple(sorted(names))


def _serving_problem(obs: Observed, ca: x509.Certificate) -> str | None:
    serving = obs.serving
    if serving is None:
        return "the serving Secret has no readable certificate"
    if not serving.key_matches:
        return "tls.key is not the key of tls.crt"
    if not issued_by(serving.cert, ca):
        return "the serving certificate was signed by another CA"
    if _sans(serving.cert) != tuple(sorted(obs.sans)):
        return "the serving certificate names other hosts than the Service's"
    if renewal_due(serving.cert, now=obs.now):
        return (f"two thirds of its lifetime have passed (notAfter "
                f"{serving.cert.not_valid_after_utc.isoformat()})")
    return None


def _live(certs: Sequence[x509.Certificate], now: dt.datetime) -> list[x509.Certificate]:
    return [c for c in certs if c.not_valid_after_utc > now]


def next_step(obs: Observed) -> Step | None:
    """The first step of the module's order that applies, or None when the CA, every
    bundle, the serving Secret and the served certificates agree."""
    if obs.ca is None:
        return NewCA("the CA Secret has no readable CA")
    if renewal_due(obs.ca.cert, now=obs.now):
        return NewCA(f"two thirds of the CA's lifetime have passed (notAfter "
                     f"{obs.ca.cert.not_valid_after_utc.isoformat()})")
    active = obs.ca.cert
    if not obs.bundles:
        return Wait("the webhook configurations have no webhook entries")
    missing = [b for b in obs.bundles if _der(active) not in {_der(c) for c in b}]
    if missing:
        # The CA of what the pods serve stays trusted even when no bundle held it (a
        # reinstall next to the Secrets an uninstall left) until step 4 retires it.
        serving_ca = [obs.serving.ca] if obs.serving and obs.serving.ca else []
        held = [c for b in obs.bundles for c in b]
        trusted = _unique([*_live([*held, *serving_ca], obs.now), active])
        return SetBundle(trusted, f"the active CA is missing from {len(missing)} of "
                         f"{len(obs.bundles)} caBundles", adds=True)
    problem = _serving_problem(obs, active)
    if problem:
        return Issue(problem)
    if all(len(b) == 1 for b in obs.bundles):
        return None
    return _drop_step(obs, active)


def _drop_step(obs: Observed, active: x509.Certificate) -> Step:
    assert obs.serving is not None  # _serving_problem passed
    want = _der(obs.serving.cert)
    if not obs.presented:
        return Wait("no ready webhook endpoint to check the served certificate on")
    stale = sum(1 for der in obs.presented if der != want)
    if stale:
        return Wait(f"{stale} of {len(obs.presented)} webhook endpoints do not serve the "
                    "renewed certificate yet (the kubelet refreshes the Secret volume)")
    return SetBundle((active,), "every webhook endpoint serves a certificate of the "
                     "active CA: the other CAs leave the caBundles", adds=False)
