#!/bin/sh
# Whole-group calls beside rocketmq-client-go's strategies, side by side in rounds on this
# machine (issue 17, item 2), and the ratios against the goals:
#
#   cd bench && sh scripts/sidebyside.sh [ROUNDS [CALLS [HASHCALLS]]]
#
# Each round runs BenchmarkPeers' rows once: averagely's and circle's (the Go client's 64 calls,
# allocd native, wasm through host.Plugin.Allocate, its owner form, and the embedding API's
# strategy.Assign) for CALLS calls each (default 5,000); then hash's client for HASHCALLS calls
# (default 10: it takes about 0.2 s a call), and hash's own rows for CALLS/5: native,
# native-memo, wasm (the same group again), wasm-rebalance (a consumer joining and leaving by
# turns) and wasm-cold (two groups by turns: nothing of the last call's hashes serves the next).
# Rounds alternate the rows under the same load; a ratio is taken within a round, and
# cmd/ratios prints each ratio's median and range over ROUNDS rounds (default 10), the rounds
# that met the goal, and the CPU. The exit status is ratios': 1 when a median misses its goal.
#
# The guests are built once and compiled into a cache first (ALLOCD_BENCH_WASM), so the rounds
# time calls, not compilation. OUT=dir keeps the raw output (peers.txt, for benchstat) and the
# load averages there; by default they go to a new temporary folder, named at the end.
set -eu
ROUNDS=${1:-10}
CALLS=${2:-5000}
HASHCALLS=${3:-10}
DIR=${OUT:-$(mktemp -d)}
mkdir -p "$DIR"
ROOT=$(go list -m -f '{{.Dir}}' github.com/allocd/allocd)
go test -c -o "$DIR/bench.test" .
go build -o "$DIR/ratios" ./cmd/ratios
for p in averagely circle hash; do
	(cd "$ROOT" && GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 go build -buildmode=c-shared -trimpath \
		-o "$DIR/plugins_${p}_wasm.wasm" "./plugins/$p/wasm")
done
FAST='Peers/(averagely|circle)/(rocketmq-go|native|wasm|wasm-owners|embed-assign)$'
HASHPEER='Peers/hash/rocketmq-go$'
HASH='Peers/hash/(native|native-memo|wasm|wasm-rebalance|wasm-cold)$'
run() { # pattern, calls
	(cd "$DIR" && ALLOCD_BENCH_WASM="$DIR" ./bench.test -test.run '^$' -test.bench "$1" -test.benchtime "${2}x" -test.benchmem)
}
run "$FAST" 1 >/dev/null # fills the compilation cache
run "Peers/hash/" 1 >/dev/null
: >"$DIR/peers.txt"
echo "start: $(uptime)" >"$DIR/load.txt"
i=0
while [ "$i" -lt "$ROUNDS" ]; do
	i=$((i + 1))
	run "$FAST" "$CALLS" >>"$DIR/peers.txt"
	run "$HASHPEER" "$HASHCALLS" >>"$DIR/peers.txt"
	run "$HASH" $((CALLS / 5)) >>"$DIR/peers.txt"
	echo "round $i of $ROUNDS: $(uptime)" >>"$DIR/load.txt"
done
echo "CPU model: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) CPUs"
echo "load averages: $(sed -n '1p' "$DIR/load.txt" | sed 's/.*load average: //') at the start, $(tail -n1 "$DIR/load.txt" | sed 's/.*load average: //') at the end"
echo "raw output: $DIR/peers.txt (benchstat reads it)"
echo
"$DIR/ratios" "$DIR/peers.txt"
