#!/usr/bin/env bash
# Builds the real binaries the e2e tests and `make dev` run: etcd, kube-apiserver,
# kube-controller-manager and a version-matched kubectl, the node's kubelet and
# kube-scheduler (wrapper module hack/k8s/node, the same pins), plus the Argo Rollouts
# controller and its sample metric plugin, `exprcheck` (hack/exprcheck: the
# expr-lang version Kargo uses, the tests' oracle for Kargo expressions) and
# `noop-webhook` (hack/noop-webhook: a Go webhook that allows everything, the floor
# `make bench-apply` measures rollgate against). They are built from the published Go
# modules (no Docker, no release tarballs) so a fresh machine only needs Go and the
# module proxy. Versions come from hack/versions.env.
#
# The real Kargo (`kargo`, from cmd/controlplane) and the real argo-rollouts-manager
# (`argo-rollouts-manager`, from ./cmd) are built from source trees at the pinned tags,
# because their modules are not served by the module proxy (every dependency is):
#   ROLLGATE_KARGO_SRC             default ../shared/upstream/kargo-<KARGO_VERSION>
#   ROLLGATE_ROLLOUTS_MANAGER_SRC  default ../shared/upstream/argo-rollouts-manager-<version>
# (relative to the repository). The trees are only read: the build writes into the
# cache, never into the tree. A missing tree is reported in one line (what to clone)
# and skipped by `all`; `kargo` or `rollouts-manager` alone then fails.
#
# helm (cmd/helm of the helm.sh/helm/v3 module, wrapper module hack/helm) runs the
# chart's tests (helm lint, helm template). `cert-manager` builds cert-manager's
# controller and cainjector (cmd/controller and cmd/cainjector of the
# github.com/cert-manager/cert-manager module, wrapper module hack/cert-manager), which
# issue the webhook's certificate and inject its CA in the chart's cert-manager test.
# `crds` copies the CRDs the chart's optional objects need on the test plane out of the
# published modules (nothing is compiled): cert-manager's (deploy/crds of
# github.com/cert-manager/cert-manager, whose only template actions, in metadata.labels,
# are filled in as cert-manager's chart would for a release named cert-manager) and the
# Prometheus Operator's ServiceMonitor and PrometheusRule (example/prometheus-operator-crd
# of github.com/prometheus-operator/prometheus-operator); and argo-helm's argo-rollouts
# chart (charts/argo-rollouts of github.com/argoproj/argo-helm, with the repository's
# LICENSE), which the node installs with `helm install` as users install Argo Rollouts.
# `registry` builds, from the github.com/google/go-containerregistry module (wrapper
# module hack/registry), the harness's OCI registry (hack/registry/main.go: TLS and basic
# auth around the module's pkg/registry) and `crane`, which `make publish` pushes the
# image with. `kube-router` builds cmd/kube-router of github.com/cloudnativelabs/kube-router/v2
# (wrapper module hack/kube-router), whose firewall enforces NetworkPolicies on the node
# for the tests that prove a policy's effect.
#
# Usage: hack/k8s/build.sh [all|k8s|rollouts|exprcheck|noop-webhook|helm|registry|cert-manager|kube-router|crds|kargo|rollouts-manager]   (default: all)
#
# Output, under ${ROLLGATE_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rollgate/k8s}:
#   <kubernetes version>/              etcd kube-apiserver kube-controller-manager kubectl
#                                      kubelet kube-scheduler
#   argo-rollouts-<rollouts version>/  rollouts-controller metrics-plugin-sample
#   exprcheck-<expr-lang version>/     exprcheck
#   noop-webhook/                      noop-webhook (+ .tree: digest of hack/noop-webhook)
#   kargo-<kargo version>/             kargo (+ kargo.tree: digest of the tree it came from)
#   argo-rollouts-manager-<version>/   argo-rollouts-manager (+ .tree)
#   helm-<helm version>/               helm
#   registry-<go-containerregistry version>/  registry crane
#   cert-manager-<version>/            controller cainjector
#   kube-router-<version>/             kube-router
#   crds-cert-manager-<version>/       cert-manager's CRDs (YAML)
#   crds-prometheus-operator-<version>/  servicemonitors and prometheusrules CRDs (YAML)
#   chart-argo-rollouts-<chart version>/  argo-helm's argo-rollouts chart and LICENSE
# Binaries already there are reused when they run and report the pinned version (for
# those built from trees: when the tree's digest is the one recorded at their build).
# Builds hold a lock on <cache>/.build.lock, so two concurrent runs (two terminals,
# `make -j`, CI steps) wait for each other instead of writing the same files.
# With ROLLGATE_K8S_BIN set, nothing is built: the binaries of the selected set
# (all sixteen by default) are checked in that one directory.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
hack="$(dirname "${here}")"
# shellcheck source=../versions.env
source "${hack}/versions.env"
version="${KUBERNETES_VERSION}"
rollouts_version="${ARGO_ROLLOUTS_VERSION}"
kargo_version="${KARGO_VERSION}"
manager_version="${ARGO_ROLLOUTS_MANAGER_VERSION}"
expr_version="${EXPR_LANG_VERSION}"
helm_version="${HELM_VERSION}"
cert_manager_version="${CERT_MANAGER_VERSION}"
prometheus_operator_version="${PROMETHEUS_OPERATOR_VERSION}"
ggcr_version="${GO_CONTAINERREGISTRY_VERSION}"
kube_router_version="${KUBE_ROUTER_VERSION}"
argo_helm_version="${ARGO_HELM_MODULE_VERSION}"
rollouts_chart_version="${ARGO_ROLLOUTS_CHART_VERSION}"
repo="$(dirname "${hack}")"
kargo_src="${ROLLGATE_KARGO_SRC:-${repo}/../shared/upstream/kargo-${kargo_version}}"
manager_src="${ROLLGATE_ROLLOUTS_MANAGER_SRC:-${repo}/../shared/upstream/argo-rollouts-manager-${manager_version}}"
# The etcd release is the one etcd/go.mod requires (one line, or inside a block).
required() {
    awk -v m="$2" '{sub(/^require[ \t]+/, "")} $1 == m {print $2}' "$1"
}
etcd_version="$(required "${here}/etcd/go.mod" go.etcd.io/etcd/server/v3)"
cache="${ROLLGATE_K8S_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/rollgate/k8s}"
out="${cache}/${version}"
rollouts_out="${cache}/argo-rollouts-${rollouts_version}"
kargo_out="${cache}/kargo-${kargo_version}"
manager_out="${cache}/argo-rollouts-manager-${manager_version}"
expr_out="${cache}/exprcheck-${expr_version}"
noop_out="${cache}/noop-webhook"
noop_src="${hack}/noop-webhook"
helm_out="${cache}/helm-${helm_version}"
registry_out="${cache}/registry-${ggcr_version}"
cert_manager_out="${cache}/cert-manager-${cert_manager_version}"
kube_router_out="${cache}/kube-router-${kube_router_version}"
cert_manager_crds="${cache}/crds-cert-manager-${cert_manager_version}"
monitoring_crds="${cache}/crds-prometheus-operator-${prometheus_operator_version}"
rollouts_chart="${cache}/chart-argo-rollouts-${rollouts_chart_version}"
k8s_binaries=(etcd kube-apiserver kube-controller-manager kubectl kubelet kube-scheduler)
rollouts_binaries=(rollouts-controller metrics-plugin-sample)
helm_binaries=(helm)
registry_binaries=(registry crane)
cert_manager_binaries=(controller cainjector)

log() { printf '[k8s] %s\n' "$*" >&2; }

# One line that says which variable names the tree and how a user gets it.
tree_missing() {
    local var="$1" dir="$2" tag="$3" project="$4"
    log "${var}=${dir}: no such source tree; get it with \`git clone --depth 1 --branch ${tag} https://github.com/${project} DIR\` and set ${var}=DIR"
}

# The upstream binaries whose source tree is there; `all` skips (and names) a missing
# one, an explicit target fails on it.
upstream_binaries() {
    local strict="$1" kind
    upstream=()
    for kind in "${@:2}"; do
        case "${kind}" in
            kargo)
                if [[ -f "${kargo_src}/go.mod" ]]; then upstream+=(kargo)
                else tree_missing ROLLGATE_KARGO_SRC "${kargo_src}" "${kargo_version}" akuity/kargo
                     if [[ "${strict}" == strict ]]; then exit 1; fi; fi ;;
            rollouts-manager)
                if [[ -f "${manager_src}/go.mod" ]]; then upstream+=(argo-rollouts-manager)
                else tree_missing ROLLGATE_ROLLOUTS_MANAGER_SRC "${manager_src}" \
                         "${manager_version}" argoproj-labs/argo-rollouts-manager
                     if [[ "${strict}" == strict ]]; then exit 1; fi; fi ;;
        esac
    done
}

what="${1:-all}"
upstream=()
case "${what}" in
    all) upstream_binaries lenient kargo rollouts-manager
         binaries=("${k8s_binaries[@]}" "${rollouts_binaries[@]}" exprcheck noop-webhook
                   "${helm_binaries[@]}" "${registry_binaries[@]}" "${cert_manager_binaries[@]}"
                   kube-router ${upstream[@]+"${upstream[@]}"}) ;;
    k8s) binaries=("${k8s_binaries[@]}") ;;
    rollouts) binaries=("${rollouts_binaries[@]}") ;;
    exprcheck) binaries=(exprcheck) ;;
    noop-webhook) binaries=(noop-webhook) ;;
    helm) binaries=("${helm_binaries[@]}") ;;
    registry) binaries=("${registry_binaries[@]}") ;;
    cert-manager) binaries=("${cert_manager_binaries[@]}") ;;
    kube-router) binaries=(kube-router) ;;
    crds) binaries=() ;;
    kargo | rollouts-manager) upstream_binaries strict "${what}"; binaries=("${upstream[@]}") ;;
    *) printf 'usage: %s [all|k8s|rollouts|exprcheck|noop-webhook|helm|registry|cert-manager|kube-router|crds|kargo|rollouts-manager]\n' "$0" >&2; exit 2 ;;
esac

dest_dir() {
    case "$1" in
        rollouts-controller | metrics-plugin-sample) printf '%s' "${rollouts_out}" ;;
        kargo) printf '%s' "${kargo_out}" ;;
        argo-rollouts-manager) printf '%s' "${manager_out}" ;;
        exprcheck) printf '%s' "${expr_out}" ;;
        noop-webhook) printf '%s' "${noop_out}" ;;
        helm) printf '%s' "${helm_out}" ;;
        registry | crane) printf '%s' "${registry_out}" ;;
        controller | cainjector) printf '%s' "${cert_manager_out}" ;;
        kube-router) printf '%s' "${kube_router_out}" ;;
        *) printf '%s' "${out}" ;;
    esac
}

src_dir() {
    case "$1" in
        noop-webhook) printf '%s' "${noop_src}" ;;
        kargo) printf '%s' "${kargo_src}" ;;
        argo-rollouts-manager) printf '%s' "${manager_src}" ;;
    esac
}

# What a binary built from a tree depends on: every Go file, go.mod and go.sum, by
# content (a fresh copy of the same tree has new mtimes and must not rebuild).
tree_digest() {
    (cd "$1" && find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) -print0 \
        | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-64)
}

# A binary counts as present only if it executes and reports the pinned version: a
# half-written file from an interrupted build, or one left from an older pin of
# etcd, must be rebuilt, not trusted.
works() {
    local bin="$1" out
    [[ -x "${bin}" ]] || return 1
    case "$(basename "${bin}")" in
        kubectl) out="$("${bin}" version --client 2>&1)" || return 1 ;;
        # A go-plugin binary run without its host's handshake says so and exits 1;
        # that message proves it starts. Its version is its directory's.
        metrics-plugin-sample)
            out="$("${bin}" 2>&1 </dev/null)" || true
            [[ "${out}" == *"This binary is a plugin"* ]]
            return ;;
        kargo) out="$("${bin}" version 2>&1)" || return 1 ;;
        # One JSON line in, one out; its version is its directory's (go.mod is pinned).
        exprcheck)
            out="$(printf '{"template":"${{ 1 }}"}\n' | "${bin}" 2>&1)" || return 1
            [[ "${out}" == *'"compiles":true'* ]]
            return ;;
        helm) out="$("${bin}" version --short 2>&1)" || return 1 ;;
        # Its source is hack/registry/main.go: rebuilt when that module's files change.
        registry) out="$("${bin}" version 2>&1)" || return 1
            [[ "${out}" == *"go-containerregistry"* ]] || return 1
            [[ -n "${2:-}" && "$(cat "${bin}.tree" 2>/dev/null)" == "$2" ]] || return 1
            if command -v go >/dev/null; then
                out="$(go version -m "${bin}" 2>&1)" || return 1
                [[ "${out}" == *"github.com/google/go-containerregistry"$'\t'"${ggcr_version}"* ]]
            fi
            return ;;
        crane) out="$("${bin}" version 2>&1)" || return 1 ;;
        # cert-manager's commands print no version without a cluster; --help proves they
        # start, and the module build info Go embeds names the release they came from.
        controller | cainjector)
            out="$("${bin}" --help 2>&1)" || return 1
            [[ "${out}" == *"Usage:"*"--kubeconfig"* ]] || return 1
            if command -v go >/dev/null; then
                out="$(go version -m "${bin}" 2>&1)" || return 1
                [[ "${out}" == *"github.com/cert-manager/cert-manager"$'\t'"${cert_manager_version}"* ]]
            fi
            return ;;
        # Go's flag package answers -h with the usage and exit 0; the version is the
        # tree's, checked by its digest below.
        noop-webhook)
            out="$("${bin}" -h 2>&1)" || return 1
            [[ "${out}" == *"-tls-cert-file"* ]] || return 1 ;;
        argo-rollouts-manager)
            out="$("${bin}" -h 2>&1)" || return 1
            [[ "${out}" == *"health-probe-bind-address"* ]] || return 1 ;;
        # `--version` prints the version upstream's Makefile sets (ldflags_kube_router).
        kube-router) out="$("${bin}" --version 2>&1)" || return 1
            [[ "${out}" == *"version ${kube_router_version},"* ]]
            return ;;
        *) out="$("${bin}" --version 2>&1)" || return 1 ;;
    esac
    case "$(basename "${bin}")" in
        kargo | argo-rollouts-manager | noop-webhook)
            [[ -n "${2:-}" && "$(cat "${bin}.tree" 2>/dev/null)" == "$2" ]] || return 1
            [[ "$(basename "${bin}")" != kargo || "${out}" == *"\"${kargo_version}\""* ]] ;;
        etcd) [[ "${out}" == *"${etcd_version#v}"* ]] ;;
        rollouts-controller) [[ "${out}" == *"${rollouts_version}"* ]] ;;
        helm) [[ "${out}" == "${helm_version}+"* ]] ;;
        crane) [[ "${out}" == "${ggcr_version}" ]] ;;
        *) [[ "${out}" == *"${version}"* ]] ;;
    esac
}

if [[ -n "${ROLLGATE_K8S_BIN:-}" ]]; then
    missing=0
    for b in ${binaries[@]+"${binaries[@]}"}; do
        # Prebuilt upstream binaries are taken as they are: no tree to compare with.
        if [[ "${b}" == kargo || "${b}" == argo-rollouts-manager || "${b}" == noop-webhook \
              || "${b}" == registry ]] \
            && [[ -x "${ROLLGATE_K8S_BIN}/${b}" ]]; then
            log "ok ${ROLLGATE_K8S_BIN}/${b}"
        elif works "${ROLLGATE_K8S_BIN}/${b}"; then
            log "ok ${ROLLGATE_K8S_BIN}/${b}"
        else
            log "missing or broken: ${ROLLGATE_K8S_BIN}/${b}"
            missing=1
        fi
    done
    exit "${missing}"
fi

command -v go >/dev/null || { log "go is not installed (needed to build ${binaries[*]:-crds})"; exit 1; }
command -v flock >/dev/null || { log "flock (util-linux) is not installed (needed to lock ${cache})"; exit 1; }

# go.mod cannot read versions.env, so a wrapper module that pins something else is
# refused here rather than silently building another release.
check_pin() {
    local modfile="$1" module="$2" want="$3" got
    got="$(required "${modfile}" "${module}")"
    if [[ "${got}" != "${want}" ]]; then
        log "${modfile} requires ${module} ${got:-(nothing)}, hack/versions.env pins ${want}"
        exit 1
    fi
}
check_pin "${here}/apiserver/go.mod" k8s.io/kubernetes "${version}"
check_pin "${here}/node/go.mod" k8s.io/kubernetes "${version}"
check_pin "${hack}/rollouts/go.mod" github.com/argoproj/argo-rollouts "${rollouts_version}"
check_pin "${hack}/exprcheck/go.mod" github.com/expr-lang/expr "${expr_version}"
check_pin "${hack}/helm/go.mod" helm.sh/helm/v3 "${helm_version}"
check_pin "${hack}/registry/go.mod" github.com/google/go-containerregistry "${ggcr_version}"
check_pin "${hack}/cert-manager/go.mod" github.com/cert-manager/cert-manager "${cert_manager_version}"
check_pin "${hack}/kube-router/go.mod" github.com/cloudnativelabs/kube-router/v2 "${kube_router_version}"

mkdir -p "${cache}"
lock="${cache}/.build.lock"
exec 9>>"${lock}"
if ! flock -n 9; then
    log "another build holds ${lock}; waiting for it (its binaries will be reused)"
    flock 9
fi

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
# The variables upstream's Makefile sets (utils/version); `--version` then reports
# v<version>+unknown, as any build without its git checkout does.
ldflags_rollouts="-s -w \
 -X github.com/argoproj/argo-rollouts/utils/version.version=${rollouts_version#v} \
 -X github.com/argoproj/argo-rollouts/utils/version.buildDate=1970-01-01T00:00:00Z"

# The variables upstream's Makefile sets: internal/version (`helm version` then reports
# v<version>+unknown) and the Kubernetes version `helm lint` and `helm template` assume
# without a cluster, from the client-go release helm requires (else v1.20.0).
helm_k8s="$(required "${hack}/helm/go.mod" k8s.io/client-go)"
helm_k8s="${helm_k8s#v0.}"
ldflags_helm="-s -w \
 -X helm.sh/helm/v3/internal/version.version=${helm_version} \
 -X helm.sh/helm/v3/internal/version.metadata=unknown \
 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 \
 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=${helm_k8s%%.*} \
 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 \
 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=${helm_k8s%%.*}"

# The variables upstream's Makefile sets (pkg/util): the version the processes log and
# send in their User-Agent.
ldflags_cert_manager="-s -w \
 -X github.com/cert-manager/cert-manager/pkg/util.AppVersion=${cert_manager_version} \
 -X github.com/cert-manager/cert-manager/pkg/util.AppGitState=clean"

# The variables upstream's Makefile sets (pkg/version), with the tag for its commit.
ldflags_kube_router="-s -w \
 -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=${kube_router_version} \
 -X github.com/cloudnativelabs/kube-router/v2/pkg/version.BuildDate=1970-01-01T00:00:00Z"

started_all=${SECONDS}

ldflags_kargo() {
    # A tree from a clone or tarball need not carry its commit; the tree digest stands
    # in for it, so `kargo version` reports the tag instead of "devel+unknown".
    printf '%s' "-s -w \
 -X github.com/akuity/kargo/pkg/x/version.version=${kargo_version} \
 -X github.com/akuity/kargo/pkg/x/version.gitCommit=${1} \
 -X github.com/akuity/kargo/pkg/x/version.gitTreeState=clean"
}

build() {
    local name="$1" module_dir="$2" pkg="$3" ldflags="$4" tree="${5:-}"
    local dir
    dir="$(dest_dir "${name}")"
    local dest="${dir}/${name}"
    if works "${dest}" "${tree}"; then
        log "${name}: cached at ${dest}"
        return 0
    fi
    mkdir -p "${dir}"
    log "${name}: building ${pkg} (first build on a fresh machine takes a while)"
    local started=${SECONDS}
    # Build to a temporary name and rename, so an interrupted build never
    # leaves something that looks like a finished binary. The build runs in the
    # background only so that a heartbeat shows it is alive during the long link;
    # it does not inherit the lock's descriptor (9), so a go process left behind
    # by a killed script cannot keep the next build waiting.
    (cd "${module_dir}" && CGO_ENABLED=0 \
        go build -trimpath -ldflags "${ldflags}" -o "${dest}.tmp" "${pkg}") 9>&- &
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
    [[ -z "${tree}" ]] || printf '%s\n' "${tree}" >"${dest}.tree"
    log "${name}: built in $((SECONDS - started))s"
}

declare -A trees=()
for b in ${upstream[@]+"${upstream[@]}"}; do
    trees[${b}]="$(tree_digest "$(src_dir "${b}")")"
done

if [[ "${what}" == all || "${what}" == k8s ]]; then
    build etcd "${here}/etcd" go.etcd.io/etcd/server/v3 "-s -w"
    build kube-apiserver "${here}/apiserver" k8s.io/kubernetes/cmd/kube-apiserver "${ldflags_k8s}"
    build kube-controller-manager "${here}/apiserver" \
        k8s.io/kubernetes/cmd/kube-controller-manager "${ldflags_k8s}"
    build kubectl "${here}/apiserver" k8s.io/kubernetes/cmd/kubectl "${ldflags_k8s}"
    build kubelet "${here}/node" k8s.io/kubernetes/cmd/kubelet "${ldflags_k8s}"
    build kube-scheduler "${here}/node" k8s.io/kubernetes/cmd/kube-scheduler "${ldflags_k8s}"
fi
if [[ "${what}" == all || "${what}" == rollouts ]]; then
    # The sample plugin's package imports an internal/ package of its own module, which
    # Go allows because the importer is inside that module: building the package
    # path from this wrapper module needs nothing special.
    build rollouts-controller "${hack}/rollouts" \
        github.com/argoproj/argo-rollouts/cmd/rollouts-controller "${ldflags_rollouts}"
    build metrics-plugin-sample "${hack}/rollouts" \
        github.com/argoproj/argo-rollouts/test/cmd/metrics-plugin-sample "${ldflags_rollouts}"
fi
if [[ "${what}" == all || "${what}" == exprcheck ]]; then
    build exprcheck "${hack}/exprcheck" . "-s -w"
fi
if [[ "${what}" == all || "${what}" == noop-webhook ]]; then
    # Rebuilt when its source changes: the tree digest is recorded next to it.
    trees[noop-webhook]="$(tree_digest "${noop_src}")"
    build noop-webhook "${noop_src}" . "-s -w" "${trees[noop-webhook]}"
fi
if [[ "${what}" == all || "${what}" == helm ]]; then
    build helm "${hack}/helm" helm.sh/helm/v3/cmd/helm "${ldflags_helm}"
fi
if [[ "${what}" == all || "${what}" == registry ]]; then
    build registry "${hack}/registry" . "-s -w" "$(tree_digest "${hack}/registry")"
    build crane "${hack}/registry" github.com/google/go-containerregistry/cmd/crane \
        "-s -w -X github.com/google/go-containerregistry/cmd/crane/cmd.Version=${ggcr_version}"
fi
if [[ "${what}" == all || "${what}" == cert-manager ]]; then
    build controller "${hack}/cert-manager" github.com/cert-manager/cert-manager/cmd/controller \
        "${ldflags_cert_manager}"
    build cainjector "${hack}/cert-manager" github.com/cert-manager/cert-manager/cmd/cainjector \
        "${ldflags_cert_manager}"
fi
if [[ "${what}" == all || "${what}" == kube-router ]]; then
    build kube-router "${hack}/kube-router" github.com/cloudnativelabs/kube-router/v2/cmd/kube-router \
        "${ldflags_kube_router}"
fi

# cert-manager's deploy/crds are the sources of its chart's CRD templates: their only
# template actions are three labels and an include of more labels. They become what
# cert-manager's chart renders for a release named cert-manager (the chart's name
# template's default), without the chart's extra labels; any other action is refused,
# so a release that templates more fails here instead of applying half-rendered YAML.
plain_cert_manager_crds() {
    local dest="$1"
    sed -i -e "s/'{{ template \"cert-manager.name\" . }}'/cert-manager/" \
        -e "s/'{{ .Release.Name }}'/cert-manager/" \
        -e '/^[[:space:]]*# Generated labels {{- include "labels" . | nindent 4 }}$/d' \
        "${dest}"/*.yaml
    if grep -l '{{' "${dest}"/*.yaml >&2; then
        log "cert-manager-crds: template actions left in the files above; update plain_cert_manager_crds"
        exit 1
    fi
}

# The YAML files `files` (globs) of `module`@`version`'s directory `from`, copied into
# `dest`; a `.complete` marker written last makes an interrupted copy count as absent.
copy_crds() {
    local name="$1" module="$2" version="$3" from="$4" dest="$5" dir
    shift 5
    if [[ -f "${dest}/.complete" ]]; then
        log "${name}: cached at ${dest}"
        return 0
    fi
    log "${name}: downloading ${module}@${version} (module proxy)"
    local started=${SECONDS}
    dir="$(cd "${cache}" && GOFLAGS=-mod=mod go mod download -json "${module}@${version}" \
        | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
    [[ -d "${dir}/${from}" ]] || { log "${name}: ${module}@${version} has no ${from}"; exit 1; }
    rm -rf "${dest}" && mkdir -p "${dest}"
    local f
    for f in "$@"; do
        cp "${dir}/${from}"/${f} "${dest}/"
    done
    chmod u+w "${dest}"/*.yaml
    [[ "${name}" != cert-manager-crds ]] || plain_cert_manager_crds "${dest}"
    touch "${dest}/.complete"
    log "${name}: $(find "${dest}" -name '*.yaml' | wc -l) CRDs in ${dest} ($((SECONDS - started))s)"
}

# argo-helm's charts/argo-rollouts (and its LICENSE) of the pinned commit, copied into
# `dest`; refused unless its Chart.yaml has the pinned chart version.
copy_rollouts_chart() {
    local dest="$1" dir
    if [[ -f "${dest}/.complete" ]]; then
        log "argo-rollouts chart: cached at ${dest}"
        return 0
    fi
    log "argo-rollouts chart: downloading github.com/argoproj/argo-helm@${argo_helm_version} (module proxy)"
    dir="$(cd "${cache}" && GOFLAGS=-mod=mod go mod download -json \
        "github.com/argoproj/argo-helm@${argo_helm_version}" \
        | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
    if ! grep -qx "version: ${rollouts_chart_version}" "${dir}/charts/argo-rollouts/Chart.yaml"; then
        log "argo-rollouts chart: argo-helm@${argo_helm_version} does not hold chart ${rollouts_chart_version} (hack/versions.env)"
        exit 1
    fi
    rm -rf "${dest}" && mkdir -p "${dest}"
    cp -r "${dir}/charts/argo-rollouts" "${dest}/argo-rollouts"
    cp "${dir}/LICENSE" "${dest}/LICENSE"
    chmod -R u+w "${dest}"
    touch "${dest}/.complete"
    log "argo-rollouts chart: ${rollouts_chart_version} in ${dest}"
}

if [[ "${what}" == all || "${what}" == crds ]]; then
    copy_crds cert-manager-crds github.com/cert-manager/cert-manager "${cert_manager_version}" \
        deploy/crds "${cert_manager_crds}" '*.yaml'
    copy_crds monitoring-crds github.com/prometheus-operator/prometheus-operator \
        "${prometheus_operator_version}" example/prometheus-operator-crd "${monitoring_crds}" \
        monitoring.coreos.com_servicemonitors.yaml monitoring.coreos.com_prometheusrules.yaml
    copy_rollouts_chart "${rollouts_chart}"
fi

for b in ${upstream[@]+"${upstream[@]}"}; do
    case "${b}" in
        kargo) build kargo "${kargo_src}" ./cmd/controlplane "$(ldflags_kargo "${trees[kargo]:0:12}")" \
                   "${trees[kargo]}" ;;
        argo-rollouts-manager) build argo-rollouts-manager "${manager_src}" ./cmd "-s -w" \
                   "${trees[argo-rollouts-manager]}" ;;
    esac
done

trees[registry]="$(tree_digest "${hack}/registry")"
for b in ${binaries[@]+"${binaries[@]}"}; do
    works "$(dest_dir "${b}")/${b}" "${trees[${b}]:-}" \
        || { log "$(dest_dir "${b}")/${b} does not run"; exit 1; }
done
case "${what}" in all | k8s) log "kubernetes ${version} and etcd ${etcd_version} ready in ${out}" ;; esac
case "${what}" in all | rollouts) log "argo-rollouts ${rollouts_version} ready in ${rollouts_out}" ;; esac
case "${what}" in all | exprcheck) log "exprcheck (expr-lang ${expr_version}) ready in ${expr_out}" ;; esac
case "${what}" in all | noop-webhook) log "noop-webhook ready in ${noop_out}" ;; esac
case "${what}" in all | helm) log "helm ${helm_version} ready in ${helm_out}" ;; esac
case "${what}" in all | registry) log "registry and crane (go-containerregistry ${ggcr_version}) ready in ${registry_out}" ;; esac
case "${what}" in all | cert-manager)
    log "cert-manager ${cert_manager_version} (controller, cainjector) ready in ${cert_manager_out}" ;; esac
case "${what}" in all | kube-router) log "kube-router ${kube_router_version} ready in ${kube_router_out}" ;; esac
case "${what}" in all | crds) log "CRDs ready in ${cert_manager_crds} and ${monitoring_crds}" ;; esac
for b in ${upstream[@]+"${upstream[@]}"}; do log "${b} ready in $(dest_dir "${b}") (from $(src_dir "${b}"))"; done
log "done in $((SECONDS - started_all))s"
# stdout: the directory of what was asked for (the Kubernetes binaries' for `all`).
case "${what}" in
    rollouts) printf '%s\n' "${rollouts_out}" ;;
    exprcheck) printf '%s\n' "${expr_out}" ;;
    noop-webhook) printf '%s\n' "${noop_out}" ;;
    helm) printf '%s\n' "${helm_out}" ;;
    registry) printf '%s\n' "${registry_out}" ;;
    cert-manager) printf '%s\n' "${cert_manager_out}" ;;
    kube-router) printf '%s\n' "${kube_router_out}" ;;
    crds) printf '%s\n%s\n' "${cert_manager_crds}" "${monitoring_crds}" ;;
    kargo) printf '%s\n' "${kargo_out}" ;;
    rollouts-manager) printf '%s\n' "${manager_out}" ;;
    *) printf '%s\n' "${out}" ;;
esac
