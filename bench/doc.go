// Package bench holds benchmarks that compare allocd's host with other hosts. It is a separate
// module so that the product never depends on what it is compared with (extism go-sdk).
//
//	cd bench && go test -run '^$' -bench . -count 6 ./... > /tmp/bench.txt
//
// BENCHMARKS.md at the repository root records the figures.
package bench
