#!/bin/sh
# Instructions of the server's side of an h2c benchmark (server/h2c_bench_test.go), counted by
# callgrind, at each N given: the benchmark runs under valgrind and its client runs beside it,
# outside valgrind (H2C_EXTERNAL), as callgrind stops at the signal of a child's exit.
# GODEBUG=asyncpreemptoff=1: callgrind asserts on the signals of Go's asynchronous preemption;
# GOGC=off, GOMAXPROCS=1: no collector work varies between runs. Per op: (I(3N) - I(N)) / 2N.
#
#	sh server/testdata/h2c-callgrind.sh TEST-BINARY BENCH N...
set -e
bin=$1 bench=$2
shift 2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for n in "$@"; do
	(cd "$(dirname "$0")/.." && H2C_EXTERNAL="$dir" GOGC=off GOMAXPROCS=1 GODEBUG=asyncpreemptoff=1 \
		valgrind --tool=callgrind --callgrind-out-file="$dir/cg.$n" "$bin" -test.run '^$' \
		-test.bench "^Benchmark$bench\$" -test.benchtime "${n}x" >"$dir/log.$n" 2>&1) &
	pid=$!
	while kill -0 $pid 2>/dev/null; do
		if [ -f "$dir/spec" ]; then
			spec=$(cat "$dir/spec")
			rm "$dir/spec"
			ALLOCD_SERVER_H2C_CHILD="$spec" "$bin" -test.run '^$' >"$dir/out.tmp"
			mv "$dir/out.tmp" "$dir/out"
		fi
		sleep 0.05
	done
	wait $pid || { cat "$dir/log.$n"; exit 1; }
	echo "$bench N=$n instructions $(grep -m1 '^summary:' "$dir/cg.$n" | cut -d' ' -f2)"
	[ -z "$KEEP" ] || cp "$dir/cg.$n" "$KEEP.$n" # KEEP=PREFIX keeps the counts for callgrind_annotate
done
