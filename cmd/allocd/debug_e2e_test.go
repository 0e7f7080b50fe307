package main_test

import (
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/allocd/allocd/internal/wasmbuild"
)

// --debug-listen serves Go's profiles on an address of its own, and only there: the API's
// address answers 404 for them. The mutex profile is sampling.
func TestServeDebugListen(t *testing.T) {
	d := startLoadDaemon(t, "--debug-listen", "127.0.0.1:0")
	addr := regexp.MustCompile(`"debugAddr":"([^"]+)"`).FindStringSubmatch(d.log.String())
	if addr == nil {
		t.Fatalf("no debug address in the log:\n%s", tail(d.log.String(), 2000))
	}
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("http://" + addr[1] + "/debug/pprof/cmdline"); code != 200 || !strings.Contains(body, "serve") {
		t.Fatalf("debug cmdline: %d %q", code, body)
	}
	if code, body := get("http://" + addr[1] + "/debug/pprof/goroutine?debug=1"); code != 200 || !strings.Contains(body, "goroutine profile") {
		t.Fatalf("debug goroutines: %d %.200q", code, body)
	}
	// the mutex profile samples (it records nothing at Go's default fraction of 0)
	if code, body := get("http://" + addr[1] + "/debug/pprof/mutex?debug=1"); code != 200 || !strings.Contains(body, "sampling period=100\n") {
		t.Fatalf("debug mutex profile: %d %.200q", code, body)
	}
	if code, _ := get(d.url + "/debug/pprof/cmdline"); code != http.StatusNotFound {
		t.Fatalf("the API address serves profiles: %d", code)
	}
}

// An address that cannot be listened on stops the start with one message naming the flag.
func TestServeRefusesABadDebugListen(t *testing.T) {
	dir := t.TempDir()
	out, err := exec.Command(wasmbuild.Allocd(t), "serve", "--listen", "127.0.0.1:0",
		"--data-dir", filepath.Join(dir, "data"), "--debug-listen", "127.0.0.1:99999").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--debug-listen 127.0.0.1:99999") {
		t.Fatalf("err %v, output:\n%s", err, out)
	}
}
