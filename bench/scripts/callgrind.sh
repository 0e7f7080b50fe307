#!/bin/sh
# Instructions per operation, counted by valgrind's callgrind, which do not move with the
# machine's load: each benchmark runs for N and 3N iterations and the script prints
# (Ir(3N) - Ir(N)) / 2N, so setup and the test binary's own start cancel out.
#
#   cd bench && sh scripts/callgrind.sh [N [ROWS]]   (N defaults to 100)
#
# ROWS, an extended regular expression, runs only the rows whose benchmark name matches it
# (default: all). With KEEP=dir the counted runs' callgrind files stay in dir, named by row and
# iterations, for callgrind_annotate's counts by function.
#
# Rows: the peers, the native and the wasm plugins of BenchmarkPeers (and for averagely and circle
# the embedding API's strategy.Assign, embed-assign), the RocketMQ adapter's
# rebalance against the client's AVG (BenchmarkRocketMQRebalance64), the Kafka adapter's plan
# against franz-go's (BenchmarkKafkaPlan64x1024), and the root module's
# BenchmarkHostSide (the host's share of a whole-group call: order check, encoding, decoding and
# checking the answer), hash's BenchmarkWholeGroupMemo and sticky's BenchmarkAssign1024x64 and BenchmarkAssignMemo1024x64. For
# the wasm rows the guests are built first (ALLOCD_BENCH_WASM: valgrind stops at the signal a
# child process's exit sends) and a warm-up run fills the compilation cache in the same
# directory, so the counted runs only load and run the compiled code; the guest's instructions
# are counted as they run (callgrind names them by address only).
#
# BenchmarkPeers' wasm rows first call until their instance's memory stops growing (settle, up
# to 20,000 calls, in both counted runs, so it cancels out): under valgrind hash's rows take
# minutes each. The guest's own collector runs every few hundred calls, so a wasm row's count
# moved by up to some 10k instructions between runs of one binary at N=100 (2026-12-03).
#
# GODEBUG=asyncpreemptoff=1: callgrind asserts on the signals of Go's asynchronous preemption.
# GOGC=off, GOMAXPROCS=1: no collector work varies between runs.
set -eu
N=${1:-100}
ROWS=${2:-.}
KEEP=${KEEP:-}
DIR=$(mktemp -d)
ROOT=$(go list -m -f '{{.Dir}}' github.com/allocd/allocd)
go test -c -o "$DIR/bench.test" .
mkdir "$DIR/plugins"
for p in averagely circle hash sticky; do
	(cd "$ROOT" && GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 go build -buildmode=c-shared -trimpath \
		-o "$DIR/plugins_${p}_wasm.wasm" "./plugins/$p/wasm")
	cp "$DIR/plugins_${p}_wasm.wasm" "$DIR/plugins/$p.wasm" # the adapter's rows (ALLOCD_PLUGINS)
done
(cd "$ROOT" && go test -c -o "$DIR/abi.test" ./abi && go test -c -o "$DIR/hash.test" ./plugins/hash &&
	go test -c -o "$DIR/sticky.test" ./plugins/sticky)
count() { # binary, benchmark, iterations
	ALLOCD_PLUGINS="$DIR/plugins" ALLOCD_BENCH_WASM="$DIR" GOGC=off GOMAXPROCS=1 GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --callgrind-out-file="$DIR/out" \
		"$DIR/$1" -test.run '^$' -test.bench "^$2\$" -test.benchtime "${3}x" >/dev/null 2>&1
	grep '^summary:' "$DIR/out" | awk '{print $2}'
	if [ -n "$KEEP" ]; then mkdir -p "$KEEP" && cp "$DIR/out" "$KEEP/$(echo "$2" | tr / _)-$3.out"; fi
}
row() { # binary, benchmark, N
	echo "$2" | grep -Eq -- "$ROWS" || return 0
	ALLOCD_PLUGINS="$DIR/plugins" ALLOCD_BENCH_WASM="$DIR" "$DIR/$1" -test.run '^$' -test.bench "^$2\$" -test.benchtime 1x >/dev/null 2>&1 # compiles
	a=$(count "$1" "$2" "$3")
	b=$(count "$1" "$2" $((3 * $3)))
	echo "$2 $(((b - a) / (2 * $3))) instructions/op"
}
for s in averagely circle; do
	for k in rocketmq-go native wasm wasm-owners wasm-rebalance wasm-cold embed-assign; do
		row bench.test "BenchmarkPeers/$s/$k" "$N"
	done
done
# the RocketMQ adapter against the client's AVG (bench/adapters_test.go): loading three plugins
# is most of each run and varies by some 10M instructions, so these rows take 5N iterations
for k in allocd-averagely/64-calls client-averagely/64-calls allocd-averagely/one-call client-averagely/one-call; do
	row bench.test "BenchmarkRocketMQRebalance64/$k" $((5 * N))
done
# the Kafka adapter's plan against franz-go's own cooperative sticky balancer (adapters_test.go):
# the registry's load varies by some 1-2 % between counted runs, so these take 20 and 60
for k in franz-go-cooperative-sticky/fresh allocd-sticky/fresh franz-go-cooperative-sticky/steady allocd-sticky/steady; do
	row bench.test "BenchmarkKafkaPlan64x1024/$k" 20
done
row bench.test BenchmarkPeers/hash/rocketmq-go 2 # 0.2 s a call natively
for k in native native-memo wasm wasm-rebalance wasm-cold; do
	row bench.test "BenchmarkPeers/hash/$k" $((N / 10 + 1))
done
row abi.test BenchmarkHostSide/list "$N"
row abi.test BenchmarkHostSide/owners "$N"
for s in fresh memo-same memo-rebalance; do
	row hash.test "BenchmarkWholeGroupMemo/$s" 20
done
for s in fresh steady; do # sticky natively on the Kafka comparison's group
	row sticky.test "BenchmarkAssign1024x64/$s" 20
done
for s in fresh-memo steady-memo rebalance-memo; do # the same through one Memo, as the plugin runs
	row sticky.test "BenchmarkAssignMemo1024x64/$s" 20
done
rm -rf "$DIR"
