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

stage "h2spec (the HTTP/2 conformance suite internal/h2's TestH2Spec runs; pinned in bench/peers' go.mod)"
if [ -z "${H2SPEC:-}" ] && [ -f bench/peers/go.mod ]; then
	H2SPEC="$(mktemp -d)/h2spec"
	(cd bench/peers && go build -o "$H2SPEC" github.com/summerwind/h2spec/cmd/h2spec)
	export H2SPEC
fi

stage "go test -race (library module)"
# go test starts the packages' runs in the order they are named, as many
# at once as there are CPUs (-p). The two longest, proxy and engine (about
# 10 minutes each under -race on 2 vCPUs), come first, so that the short
# ones fill in beside them. In ./...'s order proxy started after bench and
# internal/* (6 minutes in, going by its 623 s in a 984 s stage) and ran
# its last 7 minutes beside nothing but the short packages.
go test -race -count=1 -timeout 40m ./proxy ./engine ./...

stage "go test -race ./engine with Config.BatchWait (minimum waits on every path of the backends that batch: uring, uring-napi)"
SPINDLE_TEST_BATCH_WAIT=100us go test -race -count=1 -timeout 20m ./engine/

stage "go test -race ./engine, receive paths without the 6.17 receive limit (older kernels; the uring backends)"
SPINDLE_TEST_NO_RECV_LIMIT=1 go test -race -count=1 -timeout 20m \
	-run 'TestEchoIntegrity|TestHalfClose|TestPeerReset|TestSlowReader|TestStarved|TestProxyForward|TestResumeInside|TestZeroAllocs|TestCloseLinger|TestTLSPausedInputCapped' ./engine/

stage "engine Go benchmarks, one short pass (every backend and Go net; under -race the figures mean nothing)"
go test -race -count=1 -run '^$' -bench '^BenchmarkEcho$' -benchtime 500x -timeout 20m ./engine/

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
