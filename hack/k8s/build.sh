#!/usr/bin/env bash
# Builds the real Kubernetes control-plane binaries the e2e tests and `make dev`
# run: etcd, kube-apiserver, kube-controller-manager and a version-matched
# kubectl. They are built from the published Go modules (no Docker, no release
# tarballs) so a fresh machine only needs Go and the module proxy.
#
# Output: ${ROLLGATE_K8S_CACHE:-$HOME/.cache/rollgate/k8s}/<version>/
# Binaries already there are reused when they run `--version` successfully.
# With ROLLGATE_K8S_BIN set, nothing is built: the binaries there are checked.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
version="$(tr -d '[:space:]' <"${here}/VERSION")"
# The etcd release is the one etcd/go.mod requires (one line, or inside a block).
etcd_version="$(awk '{sub(/^require[ \t]+/, "")} $1 == "go.etcd.io/etcd/server/v3" {print $2}' \
    "${here}/etcd/go.mod")"
out="${ROLLGATE_K8S_CACHE:-${HOME}/.cache/rollgate/k8s}/${version}"
binaries=(etcd kube-apiserver kube-controller-manager kubectl)

log() { printf '[k8s] %s\n' "$*" >&2; }

# A binary counts as present only if it executes and reports the pinned version: a
# half-written file from an interrupted build, or one left from an older pin of
# etcd, must be rebuilt, not trusted.
works() {
    local bin="$1" out
    [[ -x "${bin}" ]] || return 1
    case "$(basename "${bin}")" in
        kubectl) out="$("${bin}" version --client 2>&1)" || return 1 ;;
        *) out="$("${bin}" --version 2>&1)" || return 1 ;;
    esac
    case "$(basename "${bin}")" in
        etcd) [[ "${out}" == *"${etcd_version#v}"* ]] ;;
        *) [[ "${out}" == *"${version}"* ]] ;;
    esac
}

if [[ -n "${ROLLGATE_K8S_BIN:-}" ]]; then
    missing=0
    for b in "${binaries[@]}"; do
        if works "${ROLLGATE_K8S_BIN}/${b}"; then
            log "ok ${ROLLGATE_K8S_BIN}/${b}"
        else
            log "missing or broken: ${ROLLGATE_K8S_BIN}/${b}"
            missing=1
        fi
    done
    exit "${missing}"
fi

command -v go >/dev/null || { log "go is not installed (needed to build ${binaries[*]})"; exit 1; }

minor="${version#v1.}"
minor="${minor%%.*}"
# The variable names come from k8s.io/component-base/version/base.go; without
# them /version reports v0.0.0-master and kubectl warns about version skew.
ldflags_k8s="-s -w \
 -X k8s.io/component-base/version.gitVersion=${version} \
 -X k8s.io/component-base/version.gitMajor=1 \
 -X k8s.io/component-base/version.gitMinor=${minor} \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z \
 -X k8s.io/client-go/pkg/version.gitVersion=${version} \
 -X k8s.io/client-go/pkg/version.gitMajor=1 \
 -X k8s.io/client-go/pkg/version.gitMinor=${minor}"

mkdir -p "${out}"
started_all=${SECONDS}

build() {
    local name="$1" module_dir="$2" pkg="$3" ldflags="$4"
    local dest="${out}/${name}"
    if works "${dest}"; then
        log "${name}: cached at ${dest}"
        return 0
    fi
    log "${name}: building ${pkg} (first build on a fresh machine takes a while)"
    local started=${SECONDS}
    # Build to a temporary name and rename, so an interrupted build never
    # leaves something that looks like a finished binary. The build runs in the
    # background only so that a heartbeat shows it is alive during the long link.
    (cd "${module_dir}" && CGO_ENABLED=0 \
        go build -trimpath -ldflags "${ldflags}" -o "${dest}.tmp" "${pkg}") &
    local pid=$! last=${SECONDS}
    while kill -0 "${pid}" 2>/dev/null; do
        sleep 1
        if ((SECONDS - last >= 30)); then
            log "${name}: still building ($((SECONDS - started))s)"
            last=${SECONDS}
        fi
    done
    if ! wait "${pid}"; then
        rm -f "${dest}.tmp"
        log "${name}: go build FAILED after $((SECONDS - started))s (go's error is above)"
        exit 1
    fi
    mv -f "${dest}.tmp" "${dest}"
    log "${name}: built in $((SECONDS - started))s"
}

build etcd "${here}/etcd" go.etcd.io/etcd/server/v3 "-s -w"
build kube-apiserver "${here}/apiserver" k8s.io/kubernetes/cmd/kube-apiserver "${ldflags_k8s}"
build kube-controller-manager "${here}/apiserver" \
    k8s.io/kubernetes/cmd/kube-controller-manager "${ldflags_k8s}"
build kubectl "${here}/apiserver" k8s.io/kubernetes/cmd/kubectl "${ldflags_k8s}"

for b in "${binaries[@]}"; do
    works "${out}/${b}" || { log "${out}/${b} does not run"; exit 1; }
done
log "all binaries ready in ${out} (kubernetes ${version}, etcd ${etcd_version}," \
    "$((SECONDS - started_all))s)"
printf '%s\n' "${out}"
