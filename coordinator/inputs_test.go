package coordinator_test

import (
	"testing"
	"time"

	"github.com/allocd/allocd/coordinator"
)

// The fingerprint of a generation's inputs is the one earlier versions stored, so that a daemon
// upgraded and restarted recomputes no group whose inputs did not change.
func TestInputsFingerprintIsStable(t *testing.T) {
	e := newEnv(t)
	e.topic("T", 5)
	e.group("g", "averagely")
	for _, hb := range []coordinator.Heartbeat{
		{CID: "c1", Topics: []string{"T"}, Labels: map[string]string{"zone": "a", "weight": "3"}},
		{CID: "c2", Topics: []string{"T"}},
	} {
		if _, err := e.c.Heartbeat("g", hb); err != nil {
			t.Fatal(err)
		}
	}
	e.advance(time.Second)
	gens, err := e.store.ListGenerations()
	if err != nil || len(gens) != 1 {
		t.Fatalf("%d generations, %v", len(gens), err)
	}
	const want = "cc6be492270cb3d2f1b43f12a49cba06"
	if gens[0].Inputs != want {
		t.Errorf("inputs fingerprint %s, want %s (the one earlier versions wrote)", gens[0].Inputs, want)
	}
}
