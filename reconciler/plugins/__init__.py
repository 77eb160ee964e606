"""RolloutManager plugins: ``spec.plugins`` into ``argo-rollouts-config`` (docs/plugins.md,
"RolloutManager plugins").

What lives here, one module per job:

- ``render``: the two ConfigMap keys and their checksum from a spec (pure).
- ``audit``: what argo-rollouts-manager rendered, compared with the spec, as findings,
  and the memory of what was reported per generation (pure).
- ``decisions``: the mode of a namespace, its owner (the oldest RolloutManager), what a
  pass does, whether the ConfigMap is in sync, the apply body, what a write removes, the
  words of the ``PluginsSynced`` condition (pure).
- ``digests``: the digest pre-flight: download over verified TLS, compare, cache.
- ``options``: ``PluginsOptions``, the feature's flags, typed, each with its one default.
- ``metrics``: the feature's Prometheus metrics, registered by the feature (the
  controller's ``collectors``), so the runtime knows no feature.
- ``controller``: the controller the runtime runs (``--controllers rollout-plugins``):
  the watches, and per namespace its mode from ``decisions``, handed to that mode's
  module: ``syncer`` (sync, and the not-owner condition), ``auditor`` (audit, next to
  argo-rollouts-manager) or ``releaser`` (no RolloutManager left); ``targets`` holds what
  they share (the ConfigMap and the Deployment by name, the condition write). I/O and
  wiring only.

The pure modules (and ``options``) import neither the Kubernetes client, ``kubekit.rest``
nor the runtime (import-linter contract in ``pyproject.toml``).
"""
