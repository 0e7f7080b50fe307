package server_test

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(h2cChildEnv); spec != "" {
		os.Exit(runH2CClient(spec)) // the client process of the h2c benchmarks
	}
	os.Exit(m.Run())
}
