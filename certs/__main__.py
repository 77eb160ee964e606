"""``python -m certs generate|bundle|inject|secret|renew``: the certificate chores of an install.

    python -m certs generate --out-dir DIR [--service S] [--namespace N] [--san X]...
    python -m certs bundle --ca-file DIR/ca.crt
    python -m certs inject [--kubeconfig F] --ca-file DIR/ca.crt [--validating rollgate] ...
    python -m certs secret [--kubeconfig F] --dir DIR [--name N] [--ca-name N] [--namespace N]
    python -m certs renew [--kubeconfig F] [--name N] [--ca-name N] [--namespace N] ...

``inject``, ``secret`` and ``renew`` talk to the cluster kubectl would: ``--kubeconfig``,
else the in-cluster config inside a pod, else ``$KUBECONFIG`` / ``~/.kube/config``.
Errors are one line on stderr: exit 2 for a CA file that cannot be read or a bad
argument, 1 for anything on the cluster side.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from typing import TYPE_CHECKING

from certs.bundle import ca_bundle
from certs.generate import generate, service_sans
from certs.lifetimes import CA_LIFETIME, SERVING_LIFETIME, parse_duration

if TYPE_CHECKING:
    from kubernetes.client import ApiClient


def parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    g = sub.add_parser("generate", help="write ca.crt ca.key tls.crt tls.key")
    g.add_argument("--out-dir", required=True)
    g.add_argument("--service", default="rollgate-webhook")
    g.add_argument("--namespace", default="rollgate-system")
    g.add_argument("--san", action="append", default=[], dest="extra_sans",
                   help="extra DNS name or IP address (repeatable)")
    _lifetimes(g)
    g.add_argument("--reuse-ca", action="store_true",
                   help="sign with ca.crt/ca.key already in --out-dir (keeps the caBundle)")

    b = sub.add_parser("bundle", help="print the caBundle (base64 PEM) of a CA file")
    b.add_argument("--ca-file", required=True)

    i = sub.add_parser("inject", help="patch the caBundle into webhook configurations")
    i.add_argument("--kubeconfig", default=None,
                   help="default: in-cluster config in a pod, else $KUBECONFIG or "
                   "~/.kube/config")
    i.add_argument("--ca-file", required=True)
    i.add_argument("--validating", action="append", default=None,
                   help="ValidatingWebhookConfiguration name (repeatable; default rollgate)")
    i.add_argument("--mutating", action="append", default=None,
                   help="MutatingWebhookConfiguration name (repeatable; default rollgate)")
    s = sub.add_parser("secret", help="create the TLS Secret from DIR unless it exists; "
                       "leave the Secret's CA in DIR/ca.crt")
    s.add_argument("--kubeconfig", default=None)
    s.add_argument("--dir", required=True, help="where generate wrote the files")
    s.add_argument("--name", default="rollgate-webhook-tls")
    s.add_argument("--ca-name", default="rollgate-webhook-ca",
                   help="the Secret that keeps the CA key (created from DIR unless it exists)")
    s.add_argument("--namespace", default="rollgate-system")

    r = sub.add_parser("renew", help="re-issue the serving certificate and rotate the CA when "
                       "due, without a failed admission call (README \"Certificate renewal\")")
    r.add_argument("--kubeconfig", default=None)
    r.add_argument("--name", default="rollgate-webhook-tls", help="the serving Secret")
    r.add_argument("--ca-name", default="rollgate-webhook-ca", help="the CA Secret")
    r.add_argument("--namespace", default="rollgate-system")
    r.add_argument("--service", default="rollgate-webhook")
    r.add_argument("--san", action="append", default=[], dest="extra_sans",
                   help="extra DNS name or IP address (repeatable)")
    r.add_argument("--validating", action="append", default=None,
                   help="ValidatingWebhookConfiguration name (repeatable; default rollgate)")
    r.add_argument("--mutating", action="append", default=None,
                   help="MutatingWebhookConfiguration name (repeatable; default rollgate)")
    _lifetimes(r)
    return p


def _duration(text: str) -> dt.timedelta:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _lifetimes(p: argparse.ArgumentParser) -> None:
    # String defaults go through ``type`` too; the flag reference shows them as written.
    p.add_argument("--lifetime", type=_duration, default=_go(SERVING_LIFETIME),
                   metavar="DURATION", help="the serving certificate's lifetime")
    p.add_argument("--ca-lifetime", type=_duration, default=_go(CA_LIFETIME),
                   metavar="DURATION", help="the CA's lifetime")


def _go(lifetime: dt.timedelta) -> str:
    return f"{int(lifetime.total_seconds()) // 3600}h"


def _api_client(kubeconfig: str | None) -> ApiClient:
    """An API client for ``--kubeconfig``, else the in-cluster config when running in a
    pod, else ``$KUBECONFIG`` / ``~/.kube/config`` (what kubectl uses on a workstation).
    Imported lazily: ``generate`` must work without the kubernetes client loaded."""
    from kubekit.client import load_api_client

    return load_api_client(kubeconfig, pool_size=1)


def _one_line(exc: BaseException) -> str:
    """What went wrong, in one line an operator can act on (no traceback)."""
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config.config_exception import ConfigException
    from urllib3.exceptions import HTTPError, MaxRetryError

    if isinstance(exc, ApiException):
        # The API server's own words (e.g. `... "rollgate" not found`).
        try:
            reason = json.loads(exc.body or "{}").get("message") or exc.reason
        except ValueError:
            reason = exc.reason
        return f"{exc.status} {reason}"
    if isinstance(exc, ConfigException):
        return (f"no cluster to talk to ({exc}); pass --kubeconfig FILE, set KUBECONFIG, "
                "or run it in a pod")
    if isinstance(exc, MaxRetryError):
        return f"cannot reach the API server ({exc.pool.host}:{exc.pool.port}): {exc.reason}"
    if isinstance(exc, HTTPError | OSError | ValueError):
        return str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {exc}"


def main(argv: list[str] | None = None, *, prog: str = "python -m certs") -> int:
    """``prog``: how the user called it (``rollgate certs`` or ``python -m certs``), for
    the usage and error lines."""
    args = parser(prog).parse_args(argv)
    if args.command == "generate":
        paths = generate(
            args.out_dir, service=args.service, namespace=args.namespace,
            extra_sans=args.extra_sans, lifetime=args.lifetime, ca_lifetime=args.ca_lifetime,
            reuse_ca=args.reuse_ca,
        )
        for path in (paths.ca_cert, paths.ca_key, paths.tls_cert, paths.tls_key):
            print(path)
        return 0
    if args.command == "bundle":
        try:
            print(ca_bundle(args.ca_file))
        except (OSError, ValueError) as exc:
            print(f"{prog} bundle: {exc}", file=sys.stderr)
            return 2
        return 0
    if args.command == "secret":
        return _secret(args, prog=prog)
    if args.command == "renew":
        return _renew(args, prog=prog)
    return _inject(args, prog=prog)


def _secret(args: argparse.Namespace, *, prog: str) -> int:
    import logging
    from pathlib import Path

    from certs.secret import ensure_secret

    logging.getLogger("urllib3").setLevel(logging.ERROR)
    try:
        done = ensure_secret(_api_client(args.kubeconfig), directory=Path(args.dir),
                             name=args.name, ca_name=args.ca_name, namespace=args.namespace)
    except Exception as exc:  # one line for the operator, never a traceback
        print(f"{prog} secret: {_one_line(exc)}", file=sys.stderr)
        return 1
    for name, what in done.items():
        print(f"Secret/{args.namespace}/{name}: {what}")
    return 0


def _renew(args: argparse.Namespace, *, prog: str) -> int:
    import logging

    from certs.renew import Target, renew

    logging.getLogger("urllib3").setLevel(logging.ERROR)
    target = Target(
        namespace=args.namespace, secret=args.name, ca_secret=args.ca_name,
        service=args.service,
        sans=tuple(service_sans(service=args.service, namespace=args.namespace,
                                extra_sans=args.extra_sans)),
        validating=tuple(args.validating or ["rollgate"]),
        mutating=tuple(args.mutating or ["rollgate"]),
        lifetime=args.lifetime, ca_lifetime=args.ca_lifetime,
    )
    try:
        lines = renew(_api_client(args.kubeconfig), target)
    except Exception as exc:  # one line for the operator, never a traceback
        print(f"{prog} renew: {_one_line(exc)}", file=sys.stderr)
        return 1
    for line in lines:
        print(line)
    return 0


def _inject(args: argparse.Namespace, *, prog: str) -> int:
    import logging

    # The client retries a refused connection and urllib3 logs each retry to stderr.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    try:
        bundle = ca_bundle(args.ca_file)
    except (OSError, ValueError) as exc:
        print(f"{prog} inject: {exc}", file=sys.stderr)
        return 2
    if args.kubeconfig and not os.path.isfile(args.kubeconfig):
        print(f"{prog} inject: {args.kubeconfig}: no such file", file=sys.stderr)
        return 2
    from certs.inject import inject

    try:
        done = inject(
            _api_client(args.kubeconfig),
            bundle=bundle,
            validating=args.validating or ["rollgate"],
            mutating=args.mutating or ["rollgate"],
        )
    except Exception as exc:  # any failure is one line for the operator, never a traceback
        print(f"{prog} inject: {_one_line(exc)}", file=sys.stderr)
        return 1
    for item in done:
        print(f"{item}: caBundle set")
    return 0


if __name__ == "__main__":
    sys.exit(main())
