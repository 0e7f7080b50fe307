//go:build !race

package harness_test

// raceSlowdown scales the time bounds of the tests that call wasm guests (race_test.go).
const raceSlowdown = 1
