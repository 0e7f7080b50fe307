//go:build race

package harness_test

// raceSlowdown scales the time bounds of the tests that call wasm guests. Under the race
// detector every allocation and copy of a guest's linear memory has its shadow memory kept,
// which on a VM whose page faults are slow (10-16 µs each) makes a sticky call of a few
// dozen queues take up to seconds: a CPU profile of TestWasmBuiltins/sticky has 80 % of its
// samples in the detector's range accesses.
const raceSlowdown = 10
