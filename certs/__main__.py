"""``python -m certs generate|inject|bundle``: the certificate chores of an install.

    python -m certs generate --out-dir DIR [--service S] [--namespace N] [--san X]...
    python -m certs bundle --ca-file DIR/ca.crt
    python -m certs inject --kubeconfig F --ca-file DIR/ca.crt [--validating rollgate] ...
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from certs.bundle import ca_bundle
from certs.generate import generate

if TYPE_CHECKING:
    from kubernetes.client import ApiClient


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m certs", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    g = sub.add_parser("generate", help="write ca.crt ca.key tls.crt tls.key")
    g.add_argument("--out-dir", required=True)
    g.add_argument("--service", default="rollgate-webhook")
    g.add_argument("--namespace", default="rollgate-system")
    g.add_argument("--san", action="append", default=[], dest="extra_sans",
                   help="extra DNS name or IP address (repeatable)")
    g.add_argument("--days", type=int, default=365)
    g.add_argument("--reuse-ca", action="store_true",
                   help="sign with ca.crt/ca.key already in --out-dir (keeps the caBundle)")

    b = sub.add_parser("bundle", help="print the caBundle (base64 PEM) of a CA file")
    b.add_argument("--ca-file", required=True)

    i = sub.add_parser("inject", help="patch the caBundle into webhook configurations")
    i.add_argument("--kubeconfig", default=None, help="default: in-cluster config")
    i.add_argument("--ca-file", required=True)
    i.add_argument("--validating", action="append", default=None,
                   help="ValidatingWebhookConfiguration name (repeatable; default rollgate)")
    i.add_argument("--mutating", action="append", default=None,
                   help="MutatingWebhookConfiguration name (repeatable; default rollgate)")
    return p


def _api_client(kubeconfig: str | None) -> ApiClient:
    """An API client from ``kubeconfig``, or the in-cluster config (imported lazily:
    ``generate`` must work without the kubernetes client loaded)."""
    from kubernetes import config

    if kubeconfig:
        return config.new_client_from_config(config_file=kubeconfig)
    from kubernetes import client

    cfg = client.Configuration()
    config.load_incluster_config(client_configuration=cfg)
    return client.ApiClient(cfg)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "generate":
        paths = generate(
            args.out_dir, service=args.service, namespace=args.namespace,
            extra_sans=args.extra_sans, days=args.days, reuse_ca=args.reuse_ca,
        )
        for path in (paths.ca_cert, paths.ca_key, paths.tls_cert, paths.tls_key):
            print(path)
        return 0
    if args.command == "bundle":
        print(ca_bundle(args.ca_file))
        return 0
    from kubernetes.client.exceptions import ApiException

    from certs.inject import inject

    try:
        done = inject(
            _api_client(args.kubeconfig),
            bundle=ca_bundle(args.ca_file),
            validating=args.validating or ["rollgate"],
            mutating=args.mutating or ["rollgate"],
        )
    except ApiException as exc:
        # The API server's own words (e.g. `... "rollgate" not found`), not a traceback.
        try:
            reason = json.loads(exc.body or "{}").get("message") or exc.reason
        except ValueError:
            reason = exc.reason
        print(f"python -m certs inject: {reason}", file=sys.stderr)
        return 1
    for item in done:
        print(f"{item}: caBundle set")
    return 0


if __name__ == "__main__":
    sys.exit(main())
