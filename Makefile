# rollgate developer commands. `make dev` and `make test` work on a fresh machine:
# they create .venv, install the project, and build etcd, kube-apiserver,
# kube-controller-manager, kubectl, the real Argo Rollouts controller and, from their
# source trees ($ROLLGATE_KARGO_SRC, $ROLLGATE_ROLLOUTS_MANAGER_SRC), the real Kargo and
# argo-rollouts-manager once (hack/k8s/build.sh; cached in ~/.cache/rollgate/k8s/, or
# taken from $ROLLGATE_K8S_BIN).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: venv k8s test test-unit test-e2e lint dev bench clean faults

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

venv: $(VENV)/.installed

k8s:
	hack/k8s/build.sh

# manifests/crds/ is the one source of the CRDs `validate` checks against; the package
# ships copies (schemas/crdschema/crds/, package data), which a unit test compares.
.PHONY: crds-data
crds-data:
	cp manifests/crds/kargo_stages.yaml manifests/crds/argoproj_rolloutmanagers.yaml \
	  schemas/crdschema/crds/

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/mypy
	@over="$$($(VENV)/bin/radon cc -s -n D schemas kubekit webhook reconciler certs rollgate)"; \
	  if [ -n "$$over" ]; then echo "functions above complexity C:"; echo "$$over"; exit 1; fi

test: venv k8s lint
	$(PY) -m pytest $(PYTEST_ARGS)

test-unit: venv
	$(PY) -m pytest tests/unit tests/http $(PYTEST_ARGS)

test-e2e: venv k8s
	$(PY) -m pytest tests/e2e tests/faults $(PYTEST_ARGS)

dev: venv k8s
	$(PY) hack/dev.py

bench: venv
	$(PY) bench/admission.py --duration 15 --rounds 10

# 100,000 mutated AdmissionReviews over TLS to the four endpoints; fails on any 5xx,
# dropped connection or answer that breaks the HTTP contract (README "Hostile and
# broken clients").
.PHONY: fuzz
fuzz: venv
	$(PY) bench/fuzz.py --requests 100000

.PHONY: bench-verification bench-plugins bench-kargo
bench-verification: venv k8s
	$(PY) bench/verification.py --stages 100
	$(PY) bench/verification.py --stages 1000
	$(PY) bench/verification.py --takeover

bench-plugins: venv k8s
	$(PY) bench/plugins.py

# Peer benchmark: the real Kargo's verification, Kargo + rollgate observe with
# --refresh-lagging, rollgate's engine (Kargo stopped); the real Argo Rollouts controller
# runs every AnalysisRun; instant and 2x4 s runs (docs/benchmarks.md).
bench-kargo: venv k8s
	$(PY) bench/kargo.py --stages 50
	$(PY) bench/kargo.py --stages 500
	$(PY) bench/kargo.py --stages 50 --runs two-step --scenarios a,c,c-paced --repeat 5

# Stage create latency through the API: no admission, rollgate's webhook, a CEL policy.
# Scale: N Stages with Kargo's full histories, the real Kargo controller (default, and
# caching every Stage of another shard) and rollgate's observe mode each alone; then
# engine mode with full histories against the write floor (docs/benchmarks.md, "Scale").
# rollgate-base: the reconciler of BENCH_BASE_REF (before the cache transforms), on the
# same plane.
BENCH_BASE_REF ?= 99d3c5e
BENCH_BASE ?= /tmp/rollgate-bench-base
.PHONY: bench-scale
bench-scale: venv k8s
	rm -rf $(BENCH_BASE) && mkdir -p $(BENCH_BASE) && git archive $(BENCH_BASE_REF) | tar -x -C $(BENCH_BASE)
	$(PY) bench/scale.py --stages 1000 --quiet-seconds 300 --base-tree $(BENCH_BASE)
	$(PY) bench/scale.py --stages 10000 --quiet-seconds 300 --base-tree $(BENCH_BASE)
	$(PY) bench/verification.py --stages 1000 --full-history

.PHONY: bench-apply
bench-apply: venv k8s
	$(PY) bench/apply_overhead.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis .dev

# The fault suites, long version (README "make faults"): the reconciler SIGKILLed 50
# times during promotions, then kube-apiserver and etcd restarted (3 s down) and 410 Gone
# forced 5 times each, then five 20 s API server outages in a row; prints the defects and
# recovery times, fails on any defect. `make test` runs the short version (defaults).
faults: venv k8s
	ROLLGATE_FAULT_KILLS=50 ROLLGATE_FAULT_RESTARTS=5 ROLLGATE_FAULT_DOWNTIME=3 \
	  ROLLGATE_FAULT_OUTAGE=20 $(PY) -m pytest tests/faults $(PYTEST_ARGS)
