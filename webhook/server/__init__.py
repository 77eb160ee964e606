"""The webhook's HTTP serving side, around the admission decisions of ``webhook``.

- ``app``: the app (``create_app``): the routes, metrics and logs around
  :func:`webhook.admission.review`;
- ``worker``: the gunicorn worker whose event loop does the TLS handshake and reads each
  request whole before a thread answers it (docs/components.md "Hostile and broken clients");
- ``framing``: where one HTTP/1.1 request ends, decided before a thread sees it (pure);
- ``http11``: a framed request read from memory, the answer's bytes (pure);
- ``tls``: the TLS context that follows certificate rotation (docs/components.md "TLS");
- ``gunicorn_conf``: gunicorn's settings and hooks; ``run``: gunicorn in the foreground;
- ``logs``: the JSON log format for gunicorn's own loggers (docs/components.md "Logs").

The decisions (``webhook.admission``, ``webhook.lookups``, ``webhook.payloads``,
``webhook.config``, ``webhook.metrics``) never import this package or gunicorn
(an import-linter contract in ``pyproject.toml``), so they are tested and benchmarked
without a server. This module imports nothing: ``python -m webhook`` imports
``webhook.server.worker`` before it sets ``PROMETHEUS_MULTIPROC_DIR``.
"""
