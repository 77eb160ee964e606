# rollgate developer commands. `make dev` and `make test` work on a fresh machine:
# they create .venv, install the project and its harness (support/), install the Debian
# packages the node needs where missing (hack/host-packages.sh: no service is started),
# and build etcd, kube-apiserver, kube-controller-manager, kubectl, kubelet,
# kube-scheduler, the real Argo Rollouts controller, helm, the test registry and crane
# and, from their source trees
# ($ROLLGATE_KARGO_SRC, $ROLLGATE_ROLLOUTS_MANAGER_SRC), the real Kargo and
# argo-rollouts-manager once (hack/k8s/build.sh; cached in ~/.cache/rollgate/k8s/, or
# $XDG_CACHE_HOME/rollgate/k8s/, or taken from $ROLLGATE_K8S_BIN), and the node's images
# (~/.cache/rollgate/images/).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: venv k8s host-packages image lock release release-artifacts publish test test-unit test-minimums test-e2e lint dev bench \
  clean faults

# The product with its test extras, and the harness and test kit (support/, a
# distribution of its own that is never shipped), both editable.
$(VENV)/.installed: pyproject.toml support/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]' -e ./support
	touch $@

venv: $(VENV)/.installed

k8s:
	hack/k8s/build.sh

# containerd, runc, CNI plugins, buildah, debootstrap, iptables, nftables, prometheus
# (promtool), where missing; needs root only when something is missing.
host-packages:
	hack/host-packages.sh

# The node's images: the pause sandbox, a Debian bookworm + Python 3.11 base, Argo
# Rollouts' (from the rollouts-controller `make k8s` builds), and
# rollgate's image from the Dockerfile (only FROM overridden), cached by their inputs.
image: venv k8s host-packages
	$(PY) -m harness.node.images

# A release in dist/: the image as an OCI archive (its digest printed), the chart package,
# the SBOM of the image's Python dependencies (CycloneDX), SHA256SUMS, then a CHANGELOG.md
# entry (support/releasing/release.py, docs/install.md "Releases"). Needs helm alone
# (hack/k8s/build.sh helm), not the Kubernetes binaries. BASE: the image's base, by default
# the Dockerfile's FROM pulled from its registry; BASE=stand-in builds on the local Debian
# stand-in where that registry cannot be reached (a test-only image).
BASE ?=
release: venv host-packages
	hack/k8s/build.sh helm >/dev/null
	$(PY) -m releasing $(if $(BASE),--base $(BASE))

# The same files for a version that was released already (at its tag, `git checkout
# v<version>`), no CHANGELOG.md entry written.
release-artifacts: venv host-packages
	hack/k8s/build.sh helm >/dev/null
	$(PY) -m releasing --artifacts-only $(if $(BASE),--base $(BASE))

# The release in dist/ pushed to REGISTRY (host[:port][/path]): the image as
# REGISTRY/rollgate:<version> (crane, hack/k8s/build.sh registry), the chart as
# oci://REGISTRY/charts/rollgate (helm push), with the credentials of `crane auth login`
# or `docker login` (support/releasing/publish.py, docs/install.md "Get the image and the
# chart").
REGISTRY ?=
publish: venv
	@test -n "$(REGISTRY)" || { echo "publish: set REGISTRY=host[:port][/path]" >&2; exit 2; }
	hack/k8s/build.sh helm >/dev/null
	hack/k8s/build.sh registry >/dev/null
	$(PY) -m releasing.publish --registry "$(REGISTRY)"

# requirements.lock, the exact versions the image installs, from pyproject.toml.
lock:
	hack/lock.sh

# manifests/crds/ is the one source of the CRDs `validate` checks against; the package
# ships copies (schemas/crdschema/crds/, package data), which a unit test compares.
.PHONY: crds-data
crds-data:
	cp manifests/crds/kargo_stages.yaml manifests/crds/argoproj_rolloutmanagers.yaml \
	  schemas/crdschema/crds/

# charts/rollgate/README.md's values table, from values.yaml's comments and
# values.schema.json (support/docgen/chart_values.py); a test fails when it is stale.
.PHONY: chart-docs
chart-docs: venv
	$(PY) -m docgen.chart_values

# The docs site (mkdocs.yml, docs/) on http://127.0.0.1:8000; make test builds it with
# --strict (tests/e2e/tooling/test_docs_site.py).
.PHONY: docs
docs: venv
	$(VENV)/bin/mkdocs serve

# docs/flags.md, every flag of every command, from the argument parsers
# (support/docgen/flags.py); a test fails when it is stale.
.PHONY: flag-docs
flag-docs: venv
	$(PY) -m docgen.flags

# docs/metrics.md, every exported metric, condition reason and Event reason, from the
# collectors and the product source (support/docgen/metrics.py, reasons.py).
.PHONY: metric-docs
metric-docs: venv
	$(PY) -m docgen.metrics

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/mypy
	@over="$$($(VENV)/bin/radon cc -s -n D schemas kubekit webhook reconciler certs rollgate \
	  support bench tests)"; \
	  if [ -n "$$over" ]; then echo "functions above complexity C:"; echo "$$over"; exit 1; fi

# The node's suites in the background while lint, test-minimums and the other suites run
# (hack/test.sh, docs/development.md "Test time").
test: venv k8s host-packages image
	PY=$(PY) hack/test.sh $(PYTEST_ARGS)

test-unit: venv
	$(PY) -m pytest tests/unit tests/http $(PYTEST_ARGS)

# The unit and HTTP suites with every runtime dependency at its lower bound in
# pyproject.toml, in a venv of their own (.venv-minimums/; hack/minimums.sh).
test-minimums:
	PYTHON=$(PYTHON) hack/minimums.sh $(PYTEST_ARGS)

test-e2e: venv k8s host-packages image
	$(PY) -m pytest tests/e2e tests/faults $(PYTEST_ARGS)

dev: venv k8s host-packages image
	$(PY) -m harness.dev $(ARGS)

bench: venv
	$(PY) -m bench.admission --duration 15 --rounds 10

# 100,000 mutated AdmissionReviews over TLS to the four endpoints from 2 processes x 3
# kept-alive connections, bodies over 8 MiB mixed in (each must get its 413), a normal
# review's latency measured meanwhile; fails on any 5xx, dropped connection or answer
# that breaks the HTTP contract (docs/components.md "Hostile and broken clients").
.PHONY: fuzz
fuzz: venv
	$(PY) -m bench.fuzz --requests 100000 --clients 2 --threads 3

.PHONY: bench-verification bench-plugins bench-kargo
bench-verification: venv k8s
	$(PY) -m bench.verification --stages 100
	$(PY) -m bench.verification --stages 1000
	$(PY) -m bench.verification --takeover

bench-plugins: venv k8s
	$(PY) -m bench.plugins

# Peer benchmark: the real Kargo's verification, Kargo + rollgate observe with
# --refresh-lagging, rollgate's engine (Kargo stopped); the real Argo Rollouts controller
# runs every AnalysisRun; instant and 2x4 s runs (docs/benchmarks.md).
bench-kargo: venv k8s
	$(PY) -m bench.kargo --stages 50
	$(PY) -m bench.kargo --stages 500
	$(PY) -m bench.kargo --stages 50 --runs two-step --scenarios a,c,c-paced --repeat 5

# Stage create latency through the API: no admission, rollgate's webhook, the Go no-op
# webhook (hack/noop-webhook, built by make k8s), a CEL policy.
# Scale: N Stages with Kargo's full histories, the real Kargo controller (default, and
# caching every Stage of another shard) and rollgate's observe mode each alone; then
# engine mode with full histories against the write floor (docs/benchmarks.md, "Scale").
# rollgate-base: the reconciler of BENCH_BASE_REF (before the cache transforms), on the
# same plane.
BENCH_BASE_REF ?= 99d3c5e
BENCH_BASE ?= /tmp/rollgate-bench-base
# Each pod's CPU and memory on the node, idle and under the admission stream (the
# chart's requests; docs/benchmarks.md "Pods on the node"). Needs root, like make dev.
.PHONY: bench-node
bench-node: venv k8s host-packages image
	$(PY) -m bench.node_resources

# Plugin changes on the node: until every Argo Rollouts pod has the new plugin, and the
# seconds without a Ready one, for rollgate's sync mode (hardened and as upstream ships
# it) and the operator. Needs root, like make dev.
.PHONY: bench-plugin-rolls
bench-plugin-rolls: venv k8s host-packages image
	$(PY) -m bench.plugin_rolls

.PHONY: bench-scale
bench-scale: venv k8s
	rm -rf $(BENCH_BASE) && mkdir -p $(BENCH_BASE) && git archive $(BENCH_BASE_REF) | tar -x -C $(BENCH_BASE)
	$(PY) -m bench.scale --stages 1000 --quiet-seconds 300 --base-tree $(BENCH_BASE)
	$(PY) -m bench.scale --stages 10000 --quiet-seconds 300 --base-tree $(BENCH_BASE)
	$(PY) -m bench.verification --stages 1000 --full-history

.PHONY: bench-apply bench-apply-node
bench-apply: venv k8s
	$(PY) -m bench.apply_overhead

# The same on the node, through Services: rollgate by its chart, the Go no-op as pods
# (docs/benchmarks.md "Stage create overhead"). Needs root, like make dev.
bench-apply-node: venv k8s host-packages image
	$(PY) -m bench.apply_overhead_node

clean:
	rm -rf $(VENV) .venv-minimums .pytest_cache .ruff_cache .hypothesis .dev

# The fault suites, long version (docs/development.md "Fault suites"): the reconciler SIGKILLed 50
# times during promotions, then kube-apiserver and etcd restarted (3 s down) and 410 Gone
# forced 5 times each, then five 20 s API server outages in a row; prints the defects and
# recovery times, fails on any defect. `make test` runs the short version (defaults).
faults: venv k8s
	ROLLGATE_FAULT_KILLS=50 ROLLGATE_FAULT_RESTARTS=5 ROLLGATE_FAULT_DOWNTIME=3 \
	  ROLLGATE_FAULT_OUTAGE=20 $(PY) -m pytest tests/faults $(PYTEST_ARGS)
