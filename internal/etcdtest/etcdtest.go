// Package etcdtest runs a real etcd, one member in a child process, for tests of the code that
// stores allocd's state in etcd. The core module does not link the etcd server: the binary is
// ALLOCD_ETCD_BIN (the Makefile builds build/etcd-test from the test/etcd module and sets it),
// or else an etcd found on PATH (Debian's etcd-server, for example). A test that needs etcd and
// finds neither fails, saying how to get one.
//
// Each member has its own data folder in t.TempDir() and free ports. Stop and Kill make it
// unavailable; Start brings it back on the same URL with the same data. The test's cleanup
// kills it, and a test process that dies anyway takes the member with it.
package etcdtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// EnvBin names the etcd binary the tests run.
const EnvBin = "ALLOCD_ETCD_BIN"

// ReadyTimeout bounds the wait for a member to answer its health check.
const ReadyTimeout = 60 * time.Second

// howToGet is the way out quoted by a test that finds no etcd.
const howToGet = "run the tests through `make test` (it builds build/etcd-test from the test/etcd module and sets " +
	EnvBin + "), or `make etcd-test` and then " + EnvBin + "=$PWD/build/etcd-test go test ..., " +
	"or put an etcd on PATH (apt-get install etcd-server)"

// Bin returns the etcd binary to run: $ALLOCD_ETCD_BIN, else etcd on PATH.
func Bin() (string, error) {
	if b := os.Getenv(EnvBin); b != "" {
		if _, err := os.Stat(b); err != nil {
			return "", fmt.Errorf("%s=%s: %w; %s", EnvBin, b, err, howToGet)
		}
		return b, nil
	}
	if b, err := exec.LookPath("etcd"); err == nil {
		return b, nil
	}
	return "", errors.New("no etcd binary: " + EnvBin + " is not set and there is no etcd on PATH; " + howToGet)
}

// Etcd is one running (or stopped) etcd member.
type Etcd struct {
	t       testing.TB
	bin     string
	stock   bool // a stock etcd, not test/etcd's binary: etcd's own flags, ports picked up front
	dataDir string
	client  string // client URL, "" until the first start resolved it
	peer    string

	mu     sync.Mutex
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	exited chan struct{}
	log    bytes.Buffer
}

// Start runs a new member and waits until it is healthy. The test fails if no binary is found
// or the member does not become healthy within ReadyTimeout.
func Start(t testing.TB) *Etcd {
	t.Helper()
	bin, err := Bin()
	if err != nil {
		t.Fatal("etcdtest: ", err)
	}
	e := &Etcd{t: t, bin: bin, dataDir: filepath.Join(t.TempDir(), "etcd")}
	e.stock = !isOurs(bin)
	if e.stock {
		e.client = "http://" + freeAddr(t)
		e.peer = "http://" + freeAddr(t)
	} else {
		e.peer = "http://127.0.0.1:0"
	}
	t.Cleanup(func() {
		e.Kill()
		if t.Failed() {
			t.Logf("etcd log (%s):\n%s", e.bin, e.Log())
		}
	})
	if err := e.start(); err != nil {
		t.Fatal("etcdtest: ", err)
	}
	return e
}

var versions sync.Map // binary path -> bool (test/etcd's own)

// isOurs tells test/etcd's binary from a stock etcd by what --version prints.
func isOurs(bin string) bool {
	if v, ok := versions.Load(bin); ok {
		return v.(bool)
	}
	out, _ := exec.Command(bin, "--version").Output()
	ours := strings.Contains(string(out), "allocd etcd-test")
	versions.Store(bin, ours)
	return ours
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Endpoints are the member's client URLs.
func (e *Etcd) Endpoints() []string { return []string{e.client} }

// DataDir is the member's data folder.
func (e *Etcd) DataDir() string { return e.dataDir }

// Log is what the member wrote to stderr, across restarts.
func (e *Etcd) Log() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.log.String()
}

func (e *Etcd) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.log.Write(p)
}

// Client returns a client of the member, closed by t's cleanup.
func (e *Etcd) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   e.Endpoints(),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal("etcdtest: client: ", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Start starts the stopped member again on the same URL with the same data, and waits until
// it is healthy. It does nothing if the member runs.
func (e *Etcd) Start() {
	e.t.Helper()
	if e.running() {
		return
	}
	if err := e.start(); err != nil {
		e.t.Fatal("etcdtest: restart: ", err)
	}
}

// Stop stops the member with SIGTERM and waits for it to exit (test/etcd's binary cuts a slow
// graceful close short after 2 s; a member still running after 10 s is killed).
func (e *Etcd) Stop() { e.signal(syscall.SIGTERM, 10*time.Second) }

// Kill stops the member with SIGKILL and waits for it to exit.
func (e *Etcd) Kill() { e.signal(syscall.SIGKILL, 0) }

func (e *Etcd) running() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cmd != nil
}

func (e *Etcd) signal(sig syscall.Signal, grace time.Duration) {
	e.mu.Lock()
	cmd, exited, stdin := e.cmd, e.exited, e.stdin
	e.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(sig)
	if grace > 0 {
		select {
		case <-exited:
		case <-time.After(grace):
			cmd.Process.Kill()
		}
	}
	<-exited
	if stdin != nil {
		stdin.Close()
	}
	e.mu.Lock()
	e.cmd = nil
	e.mu.Unlock()
}

func (e *Etcd) args() []string {
	if !e.stock {
		listen := e.client
		if listen == "" {
			listen = "http://127.0.0.1:0"
		}
		return []string{"--data-dir", e.dataDir, "--listen-client", listen, "--listen-peer", e.peer, "--exit-with-stdin"}
	}
	return []string{
		"--name", "default", "--data-dir", e.dataDir,
		"--listen-client-urls", e.client, "--advertise-client-urls", e.client,
		"--listen-peer-urls", e.peer, "--initial-advertise-peer-urls", e.peer,
		"--initial-cluster", "default=" + e.peer, "--log-level", "error",
	}
}

func (e *Etcd) start() error {
	cmd := exec.Command(e.bin, e.args()...)
	cmd.Stderr = e
	// The member dies with the test process (Pdeathsig), and test/etcd's binary also when its
	// standard input closes.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", e.bin, err)
	}
	exited := make(chan struct{})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if u, ok := strings.CutPrefix(line, "ready "); ok && !e.stock {
				select {
				case ready <- u:
				default:
				}
				continue
			}
			e.Write([]byte(line + "\n"))
		}
		cmd.Wait()
		close(exited)
	}()
	e.mu.Lock()
	e.cmd, e.stdin, e.exited = cmd, stdin, exited
	e.mu.Unlock()

	deadline := time.Now().Add(ReadyTimeout)
	fail := func(err error) error {
		e.Kill()
		return fmt.Errorf("%s %s: %w (log: %s)", e.bin, strings.Join(e.args(), " "), err, lastLines(e.Log(), 10))
	}
	if !e.stock {
		select {
		case u := <-ready:
			e.client = u
		case <-exited:
			return fail(errors.New("exited before it was ready"))
		case <-time.After(ReadyTimeout):
			return fail(fmt.Errorf("not ready after %v", ReadyTimeout))
		}
	}
	if err := e.waitHealthy(deadline, exited); err != nil {
		return fail(err)
	}
	return nil
}

// waitHealthy polls the member's /health until it reports healthy (it has a raft leader and
// serves reads), the member exits, or the deadline passes.
func (e *Etcd) waitHealthy(deadline time.Time, exited <-chan struct{}) error {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.client+"/health", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && bytes.Contains(b, []byte(`"health":"true"`)) {
				return nil
			}
			last = fmt.Sprintf("%s: %s", resp.Status, bytes.TrimSpace(b))
		} else {
			last = err.Error()
		}
		select {
		case <-exited:
			return errors.New("exited before it was healthy")
		case <-ctx.Done():
			return fmt.Errorf("not healthy after %v: %s", ReadyTimeout, last)
		case <-tick.C:
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
