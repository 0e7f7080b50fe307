package averagely

import (
	"runtime"
	"testing"

	"github.com/allocd/allocd/internal/wasmbuild"
)

// TestGuestOwners runs Owners' tests in a wasm guest, where fillBlocks is owners_wasm.s (natively
// it is owners_other.go, which the other tests run): every n up to 300 with every c up to 70, the
// large shapes, and nothing written past the end.
func TestGuestOwners(t *testing.T) {
	if runtime.GOARCH == "wasm" {
		t.Skip("this is the guest already")
	}
	wasmbuild.GuestTests(t, "plugins/averagely", []string{"TestOwnersIsAllocate", "TestJavaVectors"})
}
