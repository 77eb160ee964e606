#!/usr/bin/env bash
# Installs the Debian packages the node harness and the alert tests use, where missing,
# without enabling or starting any of their services (`make host-packages`, run by
# `make test` and `make dev`):
#
#   containerd runc containernetworking-plugins   the node's container runtime and CNI
#   buildah debootstrap                           the images, made locally (no registry)
#   iptables nftables                             kubelet's chains, and reading them back
#   ipset                                         kube-router's firewall on the node (its sets)
#   prometheus                                    promtool, for the alert rules' tests
#
# A package's maintainer script would start its service (prometheus, containerd) through
# invoke-rc.d: a policy-rc.d that answers 101 ("action forbidden") is in place for the
# install and removed afterwards, and nothing is enabled. The harness starts containerd
# itself, with a private root, state and socket.
#
# Needs root (apt). Without it, says which packages are missing and exits 1; with all of
# them present it does nothing and needs no root.
set -euo pipefail

packages=(containerd runc containernetworking-plugins buildah debootstrap iptables nftables
          ipset prometheus)
log() { printf '[host-packages] %s\n' "$*" >&2; }

missing=()
for p in "${packages[@]}"; do
    status="$(dpkg-query -W -f='${Status}' "${p}" 2>/dev/null || true)"
    [[ "${status}" == "install ok installed" ]] || missing+=("${p}")
done
if [[ ${#missing[@]} -eq 0 ]]; then
    log "all present: ${packages[*]}"
    exit 0
fi
if [[ "$(id -u)" != 0 ]]; then
    log "missing: ${missing[*]}; run \`sudo make host-packages\` (apt-get install, no service started)"
    exit 1
fi

policy=/usr/sbin/policy-rc.d
ours=0
if [[ ! -e "${policy}" ]]; then
    printf '#!/bin/sh\n# rollgate hack/host-packages.sh: no service starts during the install\nexit 101\n' \
        >"${policy}"
    chmod 755 "${policy}"
    ours=1
fi
cleanup() { if [[ ${ours} == 1 ]]; then rm -f "${policy}"; fi; }
trap cleanup EXIT

log "installing: ${missing[*]}"
started=${SECONDS}
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
log "installed in $((SECONDS - started))s"
