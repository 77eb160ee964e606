"""The Kubernetes plumbing the webhook and the reconciler share, so neither imports the
other: API client and kubeconfig loading (``client``), the plain-JSON REST helper and
its error classifiers (``rest``), the kinds rollgate uses as ``Resource`` values
(``kinds``) and JSON log lines (``logs``).

Layering: ``kubekit`` may import ``schemas`` and nothing else of rollgate's.
"""
