"""certs.renewal: the order in which the CA, the caBundles and the serving certificate
change, decided from observations alone; and certs.lifetimes."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from certs.generate import build_serving_cert
from certs.lifetimes import parse_duration, renewal_due
from certs.pki import build_ca
from certs.renewal import (
    CA,
    Issue,
    NewCA,
    Observed,
    Serving,
    SetBundle,
    Wait,
    issued_by,
    next_step,
)

NOW = dt.datetime(2027, 1, 1, tzinfo=dt.UTC)
SANS = ("rollgate-webhook.rollgate-system.svc", "localhost")
YEAR = dt.timedelta(days=365)


def _ca(*, at: dt.datetime = NOW, lifetime: dt.timedelta = 5 * YEAR) -> CA:
    cert, key = build_ca(common_name="rollgate-ca@rollgate-webhook.rollgate-system",
                         lifetime=lifetime, now=at)
    return CA(cert, key)


def _serving(ca: CA, *, at: dt.datetime = NOW, sans: tuple[str, ...] = SANS) -> Serving:
    cert, _ = build_serving_cert(ca_cert=ca.cert, ca_key=ca.key,  # type: ignore[arg-type]
                                 sans=list(sans), lifetime=YEAR, now=at)
    return Serving(cert, key_matches=True)


def _der(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.DER)


def _observed(ca: CA | None, serving: Serving | None, *bundles: tuple[x509.Certificate, ...],
              presented: tuple[bytes | None, ...] = (), now: dt.datetime = NOW) -> Observed:
    return Observed(now=now, ca=ca, serving=serving, bundles=bundles or ((),),
                    presented=presented, sans=SANS)


def test_nothing_to_do_when_everything_agrees() -> None:
    ca = _ca()
    assert next_step(_observed(ca, _serving(ca), (ca.cert,), (ca.cert,))) is None


def test_a_missing_or_aged_ca_is_replaced_first() -> None:
    assert isinstance(next_step(_observed(None, None)), NewCA)
    old = _ca(at=NOW - 4 * YEAR)  # 4 of 5 years used
    step = next_step(_observed(old, _serving(old), (old.cert,)))
    assert isinstance(step, NewCA) and "two thirds" in step.why


def test_the_active_ca_joins_every_bundle_next_to_the_live_ones() -> None:
    old, expired, active = _ca(at=NOW - YEAR), _ca(at=NOW - 2 * YEAR, lifetime=YEAR), _ca()
    step = next_step(_observed(active, _serving(old), (old.cert, expired.cert), (old.cert,)))
    assert isinstance(step, SetBundle) and step.adds
    assert [_der(c) for c in step.certs] == [_der(old.cert), _der(active.cert)]


def test_a_reinstall_keeps_trusting_the_ca_of_what_the_pods_serve() -> None:
    """The Secrets an uninstall left, a CA Secret made anew, empty webhook configurations:
    the bundle holds the served certificate's CA as well as the new one."""
    old, active = _ca(at=NOW - YEAR), _ca()
    serving = replace(_serving(old), ca=old.cert)
    step = next_step(_observed(active, serving, (), ()))
    assert isinstance(step, SetBundle) and step.adds
    assert [_der(c) for c in step.certs] == [_der(old.cert), _der(active.cert)]


@pytest.mark.parametrize(("serving", "why"), [
    (None, "no readable certificate"),
    ("other-ca", "signed by another CA"),
    ("aged", "two thirds"),
    ("wrong-key", "not the key"),
    ("other-names", "other hosts"),
])
def test_the_serving_certificate_is_reissued(serving: str | None, why: str) -> None:
    ca = _ca()
    made = {
        None: None,
        # Same subject as the active CA: only the signature tells them apart.
        "other-ca": _serving(_ca()),
        "aged": _serving(ca, at=NOW - dt.timedelta(days=250)),
        "wrong-key": replace(_serving(ca), key_matches=False),
        "other-names": _serving(ca, sans=("elsewhere.example",)),
    }[serving]
    step = next_step(_observed(ca, made, (ca.cert,)))
    assert isinstance(step, Issue) and why in step.why


def test_old_cas_leave_the_bundles_only_when_every_endpoint_serves_the_new_certificate() -> None:
    old, active = _ca(at=NOW - YEAR), _ca()
    serving = _serving(active)
    bundles = ((old.cert, active.cert), (old.cert, active.cert))
    new, stale = _der(serving.cert), _der(_serving(old).cert)
    assert isinstance(next_step(_observed(active, serving, *bundles)), Wait)  # no endpoint
    waiting = next_step(_observed(active, serving, *bundles, presented=(new, stale)))
    assert isinstance(waiting, Wait) and "1 of 2" in waiting.why
    assert isinstance(next_step(_observed(active, serving, *bundles, presented=(new, None))), Wait)
    step = next_step(_observed(active, serving, *bundles, presented=(new, new)))
    assert isinstance(step, SetBundle) and not step.adds
    assert [_der(c) for c in step.certs] == [_der(active.cert)]


@dataclass
class _Cluster:
    """The cluster as renewal sees it, one tick a run: the pods serve what the Secret
    held a tick earlier (the kubelet's refresh), the API server trusts the bundle it
    held a tick earlier (its informer)."""

    ca: CA | None
    secret: Serving | None
    bundle: tuple[x509.Certificate, ...]
    served: Serving | None
    trusted: tuple[x509.Certificate, ...]



def _trusts(served: Serving | None, trusted: tuple[x509.Certificate, ...]) -> bool:
    """An admission call succeeds: a CA of the bundle signed what the pod serves."""
    return served is not None and any(issued_by(served.cert, ca) for ca in trusted)


def _run(cluster: _Cluster, now: dt.datetime) -> list[str]:
    """One renew run against the simulated cluster; the kinds of step it took."""
    taken: list[str] = []
    for _ in range(4):
        presented = (_der(cluster.served.cert),) if cluster.served else (None,)
        step = next_step(Observed(now=now, ca=cluster.ca, serving=cluster.secret,
                                  bundles=(cluster.bundle,), presented=presented, sans=SANS))
        if step is None or isinstance(step, Wait):
            break
        taken.append(type(step).__name__)
        if isinstance(step, NewCA):
            cluster.ca = _ca(at=now)
        elif isinstance(step, Issue):
            assert cluster.ca is not None
            cluster.secret = _serving(cluster.ca, at=now)
        else:
            cluster.bundle = step.certs
            if step.adds:
                break
    return taken


def test_six_years_of_weekly_runs_never_fail_a_call_and_rotate_the_ca() -> None:
    """From an install that predates the CA Secret (its CA key lost) through a CA
    rotation: after every run and every propagation, the API server trusts what the
    pods serve."""
    lost = _ca(at=NOW - YEAR / 2, lifetime=YEAR)  # the CA key an older chart threw away
    first = _serving(lost, at=NOW - YEAR / 2)
    cluster = _Cluster(ca=_ca(), secret=first, bundle=(lost.cert,), served=first,
                       trusted=(lost.cert,))
    steps: list[str] = []
    week = dt.timedelta(days=7)
    for tick in range(6 * 52):
        now = NOW + tick * week
        steps += _run(cluster, now)
        assert _trusts(cluster.served, cluster.trusted), f"week {tick}: a call would fail"
        # Either may propagate first: the kubelet's refresh or the API server's informer.
        assert _trusts(cluster.secret, cluster.trusted), f"week {tick}: kubelet first"
        assert _trusts(cluster.served, cluster.bundle), f"week {tick}: API server first"
        cluster.served, cluster.trusted = cluster.secret, cluster.bundle
        assert cluster.served is not None and cluster.served.cert.not_valid_after_utc > now
    assert steps.count("NewCA") == 1  # 5-year CA, rotated after 3 years 4 months
    assert steps.count("Issue") >= 6  # the first re-issue, then every 8 months
    assert len(cluster.bundle) == 1


def test_durations() -> None:
    assert parse_duration("8760h") == YEAR
    assert parse_duration("1h30m") == dt.timedelta(minutes=90)
    assert parse_duration("90s") == dt.timedelta(seconds=90)
    for bad in ("", "1y", "10", "0s", "-1h", "1h 2m"):
        with pytest.raises(ValueError, match=r"duration|longer than 0"):
            parse_duration(bad)


def test_renewal_is_due_after_two_thirds_of_the_lifetime() -> None:
    ca = _ca(lifetime=dt.timedelta(days=300))
    start = ca.cert.not_valid_before_utc
    span = ca.cert.not_valid_after_utc - start
    assert not renewal_due(ca.cert, now=start + span * 0.66)
    assert renewal_due(ca.cert, now=start + span * 0.67)
    assert renewal_due(ca.cert, now=start - dt.timedelta(seconds=1))
