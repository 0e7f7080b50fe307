#!/bin/sh
# Instructions per operation, counted by valgrind's callgrind, which do not move with the
# machine's load: each benchmark runs for N and 3N iterations and the script prints
# (Ir(3N) - Ir(N)) / 2N, so setup and the test binary's own start cancel out.
#
#   cd bench && sh scripts/callgrind.sh [N]      (N defaults to 100)
#
# Rows: the peers and the native plugins of BenchmarkPeers, and the root module's
# BenchmarkHostSide (the host's share of a whole-group call: order check, encoding, decoding and
# checking the answer), hash's BenchmarkWholeGroupMemo and sticky's BenchmarkAssign1024x64.
# The wasm rows are left out: the guest's compiled code runs under valgrind, but its counts came
# out 30x what its run time allows, and callgrind's --toggle-collect, which would leave out the
# setup, does not survive Go's threads.
#
# GODEBUG=asyncpreemptoff=1: callgrind asserts on the signals of Go's asynchronous preemption.
# GOGC=off, GOMAXPROCS=1: no collector work varies between runs.
set -eu
N=${1:-100}
DIR=$(mktemp -d)
ROOT=$(go list -m -f '{{.Dir}}' github.com/allocd/allocd)
go test -c -o "$DIR/bench.test" .
(cd "$ROOT" && go test -c -o "$DIR/abi.test" ./abi && go test -c -o "$DIR/hash.test" ./plugins/hash &&
	go test -c -o "$DIR/sticky.test" ./plugins/sticky)
count() { # binary, benchmark, iterations
	GOGC=off GOMAXPROCS=1 GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --callgrind-out-file="$DIR/out" \
		"$DIR/$1" -test.run '^$' -test.bench "^$2\$" -test.benchtime "${3}x" >/dev/null 2>&1
	grep '^summary:' "$DIR/out" | awk '{print $2}'
}
row() { # binary, benchmark, N
	a=$(count "$1" "$2" "$3")
	b=$(count "$1" "$2" $((3 * $3)))
	echo "$2 $(((b - a) / (2 * $3))) instructions/op"
}
for s in averagely circle; do
	row bench.test "BenchmarkPeers/$s/rocketmq-go" "$N"
	row bench.test "BenchmarkPeers/$s/native" "$N"
done
row bench.test BenchmarkPeers/hash/rocketmq-go 2 # 0.2 s a call natively
row bench.test BenchmarkPeers/hash/native "$N"
row abi.test BenchmarkHostSide/list "$N"
row abi.test BenchmarkHostSide/owners "$N"
for s in fresh memo-same memo-rebalance; do
	row hash.test "BenchmarkWholeGroupMemo/$s" 20
done
for s in fresh steady; do # sticky natively on the Kafka comparison's group
	row sticky.test "BenchmarkAssign1024x64/$s" 20
done
rm -rf "$DIR"
