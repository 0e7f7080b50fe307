// Package bench holds benchmarks that compare allocd's host with other hosts. It is a separate
// module so that the product never depends on what it is compared with (extism go-sdk).
//
//	cd bench && go test -run '^$' -bench . -count 6 ./... > /tmp/bench.txt
//
// scripts/sidebyside.sh runs BenchmarkPeers' rows in rounds and prints, with cmd/ratios, each of
// issue 17's ratios to the peers (median and range over the rounds, against its goal) and the
// CPU; scripts/callgrind.sh counts instructions a call, which do not move with the load.
// BENCHMARKS.md at the repository root records the figures.
package bench
