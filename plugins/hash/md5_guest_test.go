package hash

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"github.com/allocd/allocd/internal/wasmbuild"
)

// guestTests are the tests TestGuestMD5 runs in the wasm guest: MD5 against crypto/md5 at every
// length and prefix around the block boundaries (with the fuzz targets' seeds), and whole rings
// against Java's vectors and the reference, the guest's way.
var guestTests = []string{
	"TestMD5Prefix", "FuzzMD5Prefix", "TestPrefixMD5", "FuzzPrefixMD5",
	"TestJavaVectorsWholeGroup", "TestAgainstReference", "TestMemoGivesNewRingsAnswers", "TestRingLookups", "TestMemoPut", "TestSameStrings", "TestMemoLookups",
}

// TestGuestMD5 runs guestTests in a wasm guest, where md5Blocks is md5block_wasm.s (natively it
// is md5block.go, which the other tests run).
func TestGuestMD5(t *testing.T) {
	if runtime.GOARCH == "wasm" {
		t.Skip("this is the guest already") // the guest runs guestTests only
	}
	wasmbuild.GuestTests(t, "plugins/hash", guestTests)
}

// TestMD5BlockAsmGenerated: md5block_wasm.s is what md5block_gen.go writes.
func TestMD5BlockAsmGenerated(t *testing.T) {
	if runtime.GOARCH == "wasm" {
		t.Skip("the go command is not in the guest") // TestGuestMD5 does not run this one there
	}
	want, err := exec.Command("go", "run", "md5block_gen.go", "-o", "-").Output()
	if err != nil {
		t.Fatalf("go run md5block_gen.go: %v", err)
	}
	have, err := os.ReadFile("md5block_wasm.s")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want) {
		t.Fatal("md5block_wasm.s is not what md5block_gen.go writes: run go generate ./plugins/hash")
	}
}
