"""A real node on this host: containerd, runc, the CNI bridge, kubelet, and the images
its pods run, made locally (no registry outside this machine is reachable; the harness's
own, ``harness.registry``, runs with the node).

- ``settings``: the names, addresses and directories one node uses.
- ``lock``: one node per machine.
- ``hoststate``: what the node may change on the host, recorded before it starts.
- ``restore``: undoes exactly what a node (or a killed one) changed.
- ``network``: the bridge and the CNI configuration.
- ``containerd``, ``kubelet``: the two node processes and their configuration.
- ``images``: the sandbox (pause) image, the Debian/Python base and rollgate's image
  from its ``Dockerfile``, cached by a digest of their inputs.
- ``cluster``: all of it composed with a plane configured for pods.

The settings that work on this kind of machine (cgroup v1, no CAP_SYS_RESOURCE, no
registry, no kube-proxy) and why are in docs/development.md "The node".
"""
