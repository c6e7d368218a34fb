#!/usr/bin/env bash
# The test command from README.md. Run it from the repository root, as root
# for the io_uring, namespace and host-tuning tests (they skip, with the
# reason, when not root).
set -euo pipefail
cd "$(dirname "$0")/.."

# stage prints a stage's heading with the time it starts (UTC), so that a
# log says where the run's time went.
stage() { echo "== $* ($(date -u +%T))"; }

stage "gofmt"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
	echo "gofmt needed on:"; echo "$unformatted"; exit 1
fi

stage "go vet"
go vet ./...

# staticcheck, pinned (go run with a version leaves go.mod alone); its
# checks are in staticcheck.conf. Both modules.
stage "staticcheck"
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
if [ -f bench/peers/go.mod ]; then (cd bench/peers && go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...); fi

stage "h2spec (the HTTP/2 conformance suite internal/h2's TestH2Spec runs; pinned in bench/peers' go.mod)"
if [ -z "${H2SPEC:-}" ] && [ -f bench/peers/go.mod ]; then
	H2SPEC="$(mktemp -d)/h2spec"
	(cd bench/peers && go build -o "$H2SPEC" github.com/summerwind/h2spec/cmd/h2spec)
	export H2SPEC
fi

# The library's tests run in two lanes side by side, each one test binary
# at a time (-p 1), where go test -p 2 ran them two at a time: in the
# background ./proxy (623 s in the last CI log, the longest) and then the
# short packages; here ./engine (571 s) and then its passes with a setting
# only some backends read. Those passes ran after the whole library stage
# before, adding their minutes to the run while engine's lane had been
# done for minutes. ./bench (about 120 s) runs in this lane, after the
# engine's passes: with it in the other, that lane took 14.4 minutes and
# this one 10.4 (a quiet fresh-clone run, 2026-12-06). The background
# lane's log goes to a file, printed whole once this lane is done, so
# that the two do not interleave; a failure in either lane fails the
# script once both have ended.
module=$(go list -m)
short=$(go list ./... | grep -v -x -e "$module/proxy" -e "$module/engine" -e "$module/bench")
lane_log=$(mktemp)
stage "go test -race ./proxy, then the short packages, in the background (their log follows the engine's passes)"
# shellcheck disable=SC2086 # short is a list of packages
go test -race -count=1 -p 1 -timeout 40m ./proxy $short >"$lane_log" 2>&1 &
lane_pid=$!
failed=0

stage "go test -race ./engine"
go test -race -count=1 -timeout 40m ./engine/ || failed=1

stage "go test -race ./engine with Config.BatchWait (minimum waits on every path of the backends that batch: uring, uring-napi)"
SPINDLE_TEST_BATCH_WAIT=100us go test -race -count=1 -timeout 20m ./engine/ || failed=1

stage "go test -race ./engine, receive paths without the 6.17 receive limit (older kernels; the uring backends)"
SPINDLE_TEST_NO_RECV_LIMIT=1 go test -race -count=1 -timeout 20m \
	-run 'TestEchoIntegrity|TestHalfClose|TestPeerReset|TestSlowReader|TestStarved|TestProxyForward|TestResumeInside|TestZeroAllocs|TestCloseLinger|TestTLSPausedInputCapped|TestWriteFailure|TestPausedResetDeliversHeld|TestUnixPeerClose|TestRearmAfterPeerReset' ./engine/ || failed=1

stage "go test -race ./bench"
go test -race -count=1 -timeout 20m ./bench/ || failed=1

stage "waiting for go test -race ./proxy and the short packages"
wait "$lane_pid" || failed=1
stage "go test -race ./proxy and the short packages: their log"
cat "$lane_log"
rm -f "$lane_log"

stage "go test -race ./engine -run TestWakeAtSQThreadLate, alone (it holds a CPU with a SCHED_FIFO loop for about a second)"
SPINDLE_TEST_RT_HOG=1 go test -race -count=1 -timeout 5m -run '^TestWakeAtSQThreadLate$' -v ./engine/ || failed=1
if [ "${CI:-}" = true ] && [ "$(id -u)" = 0 ]; then
	stage "go test -race the cpuset partition tests on a real partition (CI only: the cpuset controller moved to cgroup v2 for them where nothing else uses it, and back)"
	bash scripts/cpuset-v2.sh go test -race -count=1 -timeout 5m -v -run '^(TestCpusetPartitionsOnKernel|TestCpusetPartitionLive|TestCpusetPartitionReadWhereNoCgroup2Mounted|TestNetNSViewSeesCpusetPartitions|TestNetNSApplyRevertWithCpusetPartition|TestTuneInNetNSSeesCpusetPartitions)$' ./tune/ ./topo/ ./cmd/spindle/ || failed=1
fi
if [ "$failed" -ne 0 ]; then
	echo "go test -race failed (above)"; exit 1
fi

stage "engine Go benchmarks, one short pass (every backend and Go net; under -race the figures mean nothing)"
go test -race -count=1 -run '^$' -bench '^BenchmarkEcho$' -benchtime 500x -timeout 20m ./engine/

stage "the uring loop's per-wake-up benchmark, one iteration (BenchmarkLoopWake: it runs, reports and stays without allocations)"
go test -race -count=1 -run '^$' -bench '^BenchmarkLoopWake$' -benchtime 1x -timeout 5m ./engine/

if [ -f bench/peers/go.mod ]; then
	stage "benchmark peers module"
	(cd bench/peers && go vet ./... && go test -race -count=1 -timeout 20m ./...)
fi

stage "spindle bench smoke run (every arm, every reply verified)"
go run ./cmd/spindle bench --duration 5s --json >/dev/null

stage "spindle bench proxy smoke run (every proxy arm, every reply verified)"
go run ./cmd/spindle bench proxy --duration 2s --json >/dev/null

stage "spindle bench proxy HTTP/1.1 smoke run (every proxy arm, every reply verified)"
go run ./cmd/spindle bench proxy --protocol http --duration 2s --json >/dev/null

stage "spindle bench proxy HTTP/2 smoke run (h2c clients through every proxy arm that can run, every request's status and body length checked, a reply checked whole before and after each load)"
go run ./cmd/spindle bench proxy --protocol h2 --duration 2s --json >/dev/null

stage "spindle bench proxy HTTP/2-to-HTTP/2 smoke run (h2c clients through every proxy arm that can run to an h2c upstream, and direct, every request's status and body length checked, a reply through each proxy checked whole before and after each load)"
go run ./cmd/spindle bench proxy --protocol h2h2 --duration 2s --json >/dev/null

stage "spindle bench http2 smoke run (every HTTP/2 arm that can run, every request's status and body length checked, a reply checked whole before and after each load)"
go run ./cmd/spindle bench http2 --duration 2s --json >/dev/null

stage "non-Linux stubs build (darwin)"
GOOS=darwin GOARCH=arm64 go build ./...
GOOS=darwin GOARCH=arm64 go vet ./...
stage "all checks passed"
