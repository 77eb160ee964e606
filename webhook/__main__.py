"""``python -m webhook``: serve the webhook with gunicorn over TLS, in the foreground.

    python -m webhook --bind 127.0.0.1:8443 --tls-cert-file tls.crt --tls-key-file tls.key \\
        [--kubeconfig F] [--allow-http-plugins] [--workers N] [--threads N] \\
        [--lookup-timeout S] [--max-connections N] [--request-timeout S]

Without ``--kubeconfig`` the in-cluster config is used when available; otherwise the
cross-object warnings are off (logged once per worker) and everything else works.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import shutil
import sys
import tempfile
from typing import Any

from webhook.config import WebhookConfig
from webhook.server.tls import expired_at, pair_problem
from webhook.server.worker import Limits

log = logging.getLogger("rollgate.webhook")

BENCH_NOOP_ENV = "ROLLGATE_WEBHOOK_BENCH_NOOP"
_DEFAULTS = Limits()


def parser(prog: str = "python -m webhook") -> argparse.ArgumentParser:
    """The command line (docs/flags.md is generated from it)."""
    p = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    p.add_argument("--bind", default="0.0.0.0:8443", help="HOST:PORT (default 0.0.0.0:8443)")
    p.add_argument("--tls-cert-file", required=True)
    p.add_argument("--tls-key-file", required=True)
    p.add_argument("--kubeconfig", default=None, help="default: in-cluster config if any")
    p.add_argument("--allow-http-plugins", action="store_true",
                   help="accept http:// plugin locations")
    p.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--threads", type=int, default=4, help="threads per worker (default 4)")
    p.add_argument("--lookup-timeout", type=float, default=2.0,
                   help="look-up budget per admission request: seconds that all of one "
                   "request's cross-object look-ups may take together (default 2)")
    p.add_argument("--cache-ttl", type=float, default=5.0,
                   help="seconds a look-up answer is reused (default 5); a found template "
                   "asked for after half of it is fetched anew in the background")
    p.add_argument("--max-connections", type=int, default=_DEFAULTS.max_connections,
                   help="connections each worker holds while they handshake, send a "
                   "request or idle between requests; past it the oldest idle one is "
                   f"closed (default {_DEFAULTS.max_connections})")
    p.add_argument("--request-timeout", type=float, default=_DEFAULTS.request_timeout,
                   help="seconds a request (with a new connection's TLS handshake) has to "
                   f"arrive whole, headers and body (default {_DEFAULTS.request_timeout:g})")
    p.add_argument("--log-level", default="info",
                   choices=["debug", "info", "warning", "error"])
    return p


def parse_args(argv: list[str] | None = None, *, prog: str = "python -m webhook"
               ) -> argparse.Namespace:
    return parser(prog).parse_args(argv)


def api_client(kubeconfig: str | None) -> Any:
    """An official-client ApiClient, or None when no cluster is configured (no
    ``--kubeconfig`` and not in a pod: a workstation's default kubeconfig is not used)."""
    from kubernetes.config.config_exception import ConfigException

    from kubekit.client import load_api_client

    try:
        return load_api_client(kubeconfig, default_kubeconfig=False)
    except ConfigException:
        if kubeconfig:
            raise
        log.warning("no kubeconfig and not in a cluster: cross-object warnings are off")
        return None


def _warn_on_pod(args: argparse.Namespace, *, reason: str, message: str) -> None:
    """The start problem as a Warning Event on the own Pod, when there is a cluster."""
    from webhook.server.pod_events import own_pod, warn_on_pod

    if own_pod() is None:
        return  # outside a Pod: the stderr or log line stands alone
    try:
        client = api_client(args.kubeconfig)
    except Exception:  # no cluster to tell
        return
    warn_on_pod(client, reason=reason, message=message)


def webhook_config(args: argparse.Namespace) -> WebhookConfig:
    return WebhookConfig(
        allow_http_plugins=args.allow_http_plugins,
        lookup_timeout=args.lookup_timeout,
        cache_ttl=args.cache_ttl,
        api_client=api_client(args.kubeconfig),
        bench_noop=os.environ.get(BENCH_NOOP_ENV) == "1",
    )


def main(argv: list[str] | None = None, *, prog: str = "python -m webhook") -> int:
    """``prog``: how the user called it (``rollgate webhook`` or ``python -m webhook``)."""
    args = parse_args(argv, prog=prog)
    if args.max_connections < 1 or args.request_timeout <= 0:
        print(f"{prog}: --max-connections and --request-timeout must be positive",
              file=sys.stderr)
        return 2
    for path in (args.tls_cert_file, args.tls_key_file):
        if not os.path.isfile(path):
            print(f"{prog}: {path}: no such file", file=sys.stderr)
            return 2
    with open(args.tls_cert_file, "rb") as cert, open(args.tls_key_file, "rb") as key:
        cert_pem = cert.read()
        problem = pair_problem(cert_pem, key.read())
    if problem:
        line = f"{args.tls_cert_file}, {args.tls_key_file}: {problem}"
        print(f"{prog}: {line}", file=sys.stderr)
        _warn_on_pod(args, reason="InvalidCertificate",
                     message=f"the webhook cannot start: {line}")
        return 2
    # Before anything imports prometheus-client: workers share metrics through files.
    own_metrics_dir = "PROMETHEUS_MULTIPROC_DIR" not in os.environ
    if own_metrics_dir:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="rollgate-metrics-")

    from webhook.server.gunicorn_conf import settings
    from webhook.server.logs import configure
    from webhook.server.run import serve

    configure(level=args.log_level)
    expired = expired_at(cert_pem, dt.datetime.now(dt.UTC))
    if expired is not None:
        # Served anyway: a renewed Secret is picked up without a restart, and the pod
        # staying up keeps this line and the expiry alert in front of the operator.
        message = ("the serving certificate has expired: the API server refuses it, so "
                   "every call fails until the Secret holds a renewed one "
                   '(docs/install.md "Certificate renewal")')
        log.error(message, extra={"notAfter": expired.isoformat(),
                                  "certfile": args.tls_cert_file})
        _warn_on_pod(args, reason="CertificateExpired",
                     message=f"{message}; notAfter {expired.isoformat()}")

    def load() -> Any:
        # Runs in each worker after fork: its own API client and connection pool.
        from webhook.server.app import create_app

        return create_app(webhook_config(args))

    try:
        serve(settings(
            bind=args.bind, certfile=args.tls_cert_file, keyfile=args.tls_key_file,
            workers=args.workers, threads=args.threads, log_level=args.log_level,
            limits=Limits(max_connections=args.max_connections,
                          request_timeout=args.request_timeout),
        ), load)
    finally:
        if own_metrics_dir:
            shutil.rmtree(os.environ["PROMETHEUS_MULTIPROC_DIR"], ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
