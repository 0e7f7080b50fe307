#!/bin/sh
# Instructions per whole-group call, counted by valgrind's callgrind, which does not move with the
# machine's load: each row runs its benchmark for N and 2N iterations with collection on only
# inside the function that is one operation, and prints (Ir(2N) - Ir(N)) / N.
#
#   cd bench && sh scripts/callgrind.sh [N]      (N defaults to 200)
#
# GODEBUG=asyncpreemptoff=1: callgrind asserts on the signals of Go's asynchronous preemption.
# GOGC=off and GOMAXPROCS=1: no collector work on other threads lands inside the counted function
# (callgrind's toggle is global), so a count is the operation's own.
set -eu
N=${1:-200}
BIN=$(mktemp -d)/bench.test
go test -c -o "$BIN" .
ALLOCD_BENCH_WASM=$(dirname "$BIN")
export ALLOCD_BENCH_WASM
ROOT=$(go list -m -f '{{.Dir}}' github.com/allocd/allocd)
for s in averagely circle hash; do
	(cd "$ROOT" && GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 go build -buildmode=c-shared -trimpath \
		-o "$ALLOCD_BENCH_WASM/plugins_${s}_wasm.wasm" ./plugins/$s/wasm)
done
count() { # benchmark, function, iterations
	out=$(mktemp)
	GOGC=off GOMAXPROCS=1 GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --callgrind-out-file="$out" --collect-atstart=no \
		--toggle-collect="$2" ${CALLGRIND_OPTS:-} "$BIN" -test.run '^$' -test.bench "^$1\$" -test.benchtime "${3}x" >/dev/null 2>&1
	grep '^summary:' "$out" | awk '{print $2}'
	rm -f "$out"
}
for s in averagely circle hash; do
	for row in "rocketmq-go github.com/allocd/allocd/bench.peerWholeGroup" \
		"native github.com/allocd/allocd/internal/nativestrategy.Allocator.Allocate" \
		"wasm github.com/allocd/allocd/host.(*Plugin).Allocate"; do
		set -- $row
		n=$N
		[ "$s" = hash ] && [ "$1" = rocketmq-go ] && n=4 # 0.2 s a call natively
		a=$(count "BenchmarkPeers/$s/$1" "$2" "$n")
		b=$(count "BenchmarkPeers/$s/$1" "$2" $((2 * n)))
		echo "$s/$1 $(( (b - a) / n )) instructions/op"
	done
done
