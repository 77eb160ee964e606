"""The harness: what the tests, the benchmarks and ``make dev`` start, by what it starts.

- ``plane``: etcd, kube-apiserver, kube-controller-manager (and kube-scheduler for
  pods), as controller-runtime's envtest starts them (their flags: ``components``);
  ``crds`` says which CRDs it gets.
- ``host_rollgate``: rollgate's webhook and reconcilers as host processes next to a plane.
- ``upstream``: the real Kargo, Argo Rollouts, argo-rollouts-manager and cert-manager.
- ``node``: kubelet, containerd, the bridge and the images that run pods on this host.
- ``registry``: the OCI registry (TLS, basic auth) ``make publish`` pushes to and the
  node pulls from.
- ``faults``: restarts and lost watch history injected into a running plane.
- ``kits``: compositions the test suites and benchmarks share.
- ``dev``: ``make dev``.

Everything it starts stops with it (``process``), also after a killed run.
"""
