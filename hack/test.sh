#!/usr/bin/env bash
# `make test` after its prerequisites (venv, binaries, host packages, images): two streams
# at once, as docs/development.md "Test time" says why.
#
# - The node's suites (`pytest tests/node`) in the background, their output in
#   $ROLLGATE_TEST_LOGS/node.log (default .test-logs/). They hold the one node for the
#   whole session and spend most of it waiting (CronJobs, the kubelet's Secret refresh,
#   certificate lifetimes), not computing.
# - On this terminal meanwhile: `make lint`, `make test-minimums`, then every other suite
#   (`pytest --ignore=tests/node`: unit, HTTP, chaos, monitoring, the loopback planes'
#   e2e and faults), each test on planes of its own. None of them touches the node or
#   the host state the node records (docs/development.md "The node").
#
# Then the node's log follows on this terminal until its session ends. Arguments go to
# both pytest runs and to test-minimums. Exits non-zero when either stream failed; an
# interrupt (Ctrl-C) reaches the node's pytest too, which stops the node and restores the
# host before it exits.
set -euo pipefail
cd "$(dirname "$0")/.."
py="${PY:-.venv/bin/python}"
logs="${ROLLGATE_TEST_LOGS:-.test-logs}"
mkdir -p "$logs"
node_log="$logs/node.log"

# Job control: the background pytest gets a process group of its own, so SIGINT is not
# ignored in it (as it is for a background job of a script) and only this script
# forwards it.
set -m
"$py" -m pytest tests/node "$@" > "$node_log" 2>&1 &
node=$!
set +m
trap 'kill -INT "$node" 2>/dev/null || true' INT TERM
echo "test: the node's suites run in the background (pid $node, log $node_log)"

rest=0
{ make --no-print-directory lint \
    && make --no-print-directory test-minimums PYTEST_ARGS="$*" \
    && "$py" -m pytest --ignore=tests/node "$@"; } || rest=$?

echo
echo "================ the node's suites (tests/node), from $node_log ================"
tail -n +1 --pid="$node" -f "$node_log"
node_rc=0
wait "$node" || node_rc=$?
echo "test: lint, minimums and the other suites exited $rest; the node's suites $node_rc"
[[ $rest -eq 0 && $node_rc -eq 0 ]]
