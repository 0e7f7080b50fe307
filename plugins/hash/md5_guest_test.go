package hash

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/allocd/allocd/internal/wasmbuild"
)

// guestTests are the tests TestGuestMD5 runs in the wasm guest: MD5 against crypto/md5 at every
// length and prefix around the block boundaries (with the fuzz targets' seeds), and whole rings
// against Java's vectors and the reference, the guest's way.
var guestTests = []string{
	"TestMD5Prefix", "FuzzMD5Prefix", "TestPrefixMD5", "FuzzPrefixMD5",
	"TestJavaVectorsWholeGroup", "TestAgainstReference", "TestMemoGivesNewRingsAnswers",
}

// TestGuestMD5 runs guestTests in a wasm guest, where md5Blocks is md5block_wasm.s (natively it
// is md5block.go, which the other tests run): this package's tests compiled with GOOS=wasip1
// and run by wazero, the runtime the daemon's host is built on, with its optimizing compiler.
func TestGuestMD5(t *testing.T) {
	if runtime.GOARCH == "wasm" {
		t.Skip("this is the guest already") // the guest runs guestTests only
	}
	root, err := wasmbuild.Root()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "hash.test.wasm")
	cmd := exec.Command("go", "test", "-c", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the guest tests: %v\n%s", err, out)
	}
	// wazero's own command, built without the race detector, under which compiling the guest
	// takes a minute instead of seconds; its version is the one the daemon's host uses (go.mod).
	cmd = exec.Command("go", "run", "github.com/tetratelabs/wazero/cmd/wazero", "run",
		"-cachedir", filepath.Join(os.TempDir(), "allocd-test-cache", "wazero-cli"),
		"-mount", root+":/:ro", "-env", "PWD=/plugins/hash", // testdata and ../../testdata where the tests look
		bin, "-test.v", "-test.run", "^("+strings.Join(guestTests, "|")+")$")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("guest tests: %v\n%s", err, out)
	}
	for _, name := range guestTests {
		if !bytes.Contains(out, []byte("--- PASS: "+name+" ")) {
			t.Errorf("the guest did not pass %s:\n%s", name, out)
		}
	}
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
