package main_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/allocd/allocd/harness"
	"github.com/allocd/allocd/internal/wasmbuild"
)

const (
	vectorsFile      = "../../testdata/rocketmq-java-vectors-small.jsonl"
	roomsVectorsFile = "../../testdata/rocketmq-java-vectors-rooms-small.jsonl"
)

// checkRun runs `allocd check` with args (the plugins folder and the shared compiled-code cache
// added) and returns its output and exit status.
func checkRun(t *testing.T, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	return runTool(t, "check", "", args...)
}

// runTool runs the real binary's subcommand sub with the built plugins folder, the shared
// compiled-code cache and args, stdin as its standard input, and returns what it wrote and its
// exit status.
func runTool(t *testing.T, sub, stdin string, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	args = append([]string{sub, "--plugins-dir", wasmbuild.BuiltinPlugins(t),
		"--cache-dir", filepath.Join(os.TempDir(), "allocd-test-cache")}, args...)
	cmd := exec.Command(wasmbuild.Allocd(t), args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		status = exit.ExitCode()
	default:
		t.Fatalf("allocd %v: %v\n%s", args, err, errOut.String())
	}
	return out.String(), errOut.String(), status
}

// checkReport is the part of `allocd check --json` the tests read.
type checkReport struct {
	Plugin struct {
		Name       string   `json:"name"`
		Properties []string `json:"properties"`
	} `json:"plugin"`
	Calls     int64                 `json:"calls"`
	Checks    []harness.CheckResult `json:"checks"`
	Stability []harness.Movement    `json:"stability"`
	Cost      struct {
		Calls        int    `json:"calls"`
		P50          int64  `json:"p50Ns"`
		P99          int64  `json:"p99Ns"`
		MemorySource string `json:"memorySource"`
	} `json:"cost"`
	Failures []harness.Failure `json:"failures"`
	Host     []harness.Counter `json:"host"`
}

func (r *checkReport) status(name string) string {
	for _, c := range r.Checks {
		if c.Name == name {
			return c.Status
		}
	}
	return ""
}

func parseReport(t *testing.T, stdout string) *checkReport {
	t.Helper()
	var r checkReport
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("--json output does not parse: %v\n%s", err, stdout)
	}
	return &r
}

// TestCheckBuiltins: `allocd check` passes every built-in plugin, the RocketMQ ones with their
// recorded Java vectors, sticky with its promise of stickiness checked, config and machineroom
// promising neither coverage nor balance (machineroom checked with the rooms its self-description
// names), nearby with its zones checked.
func TestCheckBuiltins(t *testing.T) {
	for _, name := range []string{"averagely", "circle", "hash", "sticky", "config", "machineroom", "nearby"} {
		t.Run(name, func(t *testing.T) {
			args := []string{name, "--scenarios", "10", "--seed", "3", "--json"}
			switch name {
			case "sticky":
			case "config", "machineroom", "nearby":
				args = append(args, "--vectors", roomsVectorsFile)
			default:
				args = append(args, "--vectors", vectorsFile)
			}
			stdout, stderr, status := checkRun(t, args...)
			if status != 0 {
				t.Fatalf("exit status %d\n%s\n%s", status, stdout, stderr)
			}
			r := parseReport(t, stdout)
			if r.Plugin.Name != name || len(r.Failures) != 0 || r.Calls == 0 || r.Cost.Calls == 0 || r.Cost.P50 <= 0 || r.Cost.MemorySource == "" || len(r.Host) == 0 {
				t.Fatalf("report: %+v", r)
			}
			for _, c := range r.Checks {
				if c.Status == harness.Fail {
					t.Errorf("check %s failed: %s", c.Name, c.Detail)
				}
			}
			want := map[string]string{harness.CheckValid: harness.Pass, harness.CheckCoverage: harness.Pass, harness.CheckDeterminism: harness.Pass, harness.CheckVectors: harness.Pass}
			switch name {
			case "sticky":
				want[harness.CheckVectors] = harness.Skip
				want[harness.CheckStability] = harness.Pass
				want[harness.CheckBalance] = harness.Figure
			case "hash":
				want[harness.CheckStability] = harness.Figure
				want[harness.CheckBalance] = harness.Figure
			case "config", "machineroom":
				want[harness.CheckCoverage] = harness.Figure
				want[harness.CheckBalance] = harness.Figure
				want[harness.CheckZones] = harness.Figure
			case "nearby":
				want[harness.CheckBalance] = harness.Figure
				want[harness.CheckZones] = harness.Pass
			default:
				want[harness.CheckBalance] = harness.Pass
			}
			for check, status := range want {
				if got := r.status(check); got != status {
					t.Errorf("check %s: %s, want %s", check, got, status)
				}
			}
		})
	}
}

// TestCheckBrokenPlugins: `allocd check` fails each broken test plugin with exit status 1, the
// right check and reason, and a small scenario printed as a JSON line that parses.
func TestCheckBrokenPlugins(t *testing.T) {
	for _, c := range []struct {
		name, check, reason string
		queues, consumers   int
	}{
		{"doubleassign", harness.CheckValid, "given to both", 2, 2},
		{"skipqueues", harness.CheckCoverage, `given to nobody`, 1, 2},
		{"nondeterministic", harness.CheckDeterminism, "answered differently", 1, 2},
		{"unbalanced", harness.CheckBalance, `and the plugin promises "balanced"`, 2, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := wasmbuild.Path(t, "harness/testdata/plugins/"+c.name)
			stdout, stderr, status := checkRun(t, path, "--scenarios", "8")
			if status != 1 {
				t.Fatalf("exit status %d, want 1\n%s\n%s", status, stdout, stderr)
			}
			if !strings.Contains(stdout, "1. "+c.check+": ") || !strings.Contains(stdout, c.reason) || !strings.Contains(stdout, "\nFAIL: 1 check failed") {
				t.Fatalf("output lacks the %s failure %q:\n%s", c.check, c.reason, stdout)
			}
			var sc *harness.Scenario
			for _, line := range strings.Split(stdout, "\n") {
				if line = strings.TrimSpace(line); strings.HasPrefix(line, `{"group":`) {
					sc = &harness.Scenario{}
					if err := json.Unmarshal([]byte(line), sc); err != nil {
						t.Fatalf("scenario line %q: %v", line, err)
					}
				}
			}
			if sc == nil || len(sc.MQAll) > c.queues || len(sc.CIDAll) > c.consumers {
				t.Fatalf("smallest scenario %+v, want at most %d queues and %d consumers:\n%s", sc, c.queues, c.consumers, stdout)
			}

			stdout, _, status = checkRun(t, "--json", path, "--scenarios", "8")
			r := parseReport(t, stdout)
			if status != 1 || len(r.Failures) != 1 || r.Failures[0].Check != c.check || r.status(c.check) != harness.Fail || r.Failures[0].Scenario == nil {
				t.Fatalf("--json: status %d, report %+v", status, r)
			}
		})
	}
}

// TestCheckReference: a plugin agrees with itself, and averagely differs from circle.
func TestCheckReference(t *testing.T) {
	stdout, stderr, status := checkRun(t, "averagely", "--reference", "averagely", "--scenarios", "6")
	if status != 0 || !strings.Contains(stdout, "reference    ok: ") || !strings.Contains(stdout, " whole-group answers equal to averagely 1.0.0") {
		t.Fatalf("averagely against itself: status %d\n%s\n%s", status, stdout, stderr)
	}
	stdout, stderr, status = checkRun(t, "averagely", "--reference", "circle", "--scenarios", "6")
	if status != 1 || !strings.Contains(stdout, "1. reference: ") || !strings.Contains(stdout, "different answer from the reference; first consumer") ||
		!strings.Contains(stdout, "plugin [0 1], reference [0 2]") {
		t.Fatalf("averagely against circle: status %d\n%s\n%s", status, stdout, stderr)
	}
}

// TestCheckStabilitySize: --stability-size measures movement on groups of one size.
func TestCheckStabilitySize(t *testing.T) {
	stdout, stderr, status := checkRun(t, "hash", "--stability-size", "64x8", "--scenarios", "3", "--json")
	if status != 0 {
		t.Fatalf("status %d\n%s\n%s", status, stdout, stderr)
	}
	r := parseReport(t, stdout)
	if len(r.Stability) != 2 {
		t.Fatalf("stability %+v", r.Stability)
	}
	for _, m := range r.Stability {
		if m.Rounds != 3 || m.Queues != 3*64 || m.Minimum == 0 || m.BetweenStayers != 0 {
			t.Errorf("hash %s: %+v", m.Event, m)
		}
	}
}

func TestCheckUsage(t *testing.T) {
	for _, c := range []struct {
		args   []string
		status int
		want   string
	}{
		{nil, 2, "name the plugin"},
		{[]string{"averagely", "circle"}, 2, "unexpected arguments"},
		{[]string{"averagely", "--strategy", "RANDOM"}, 2, "--strategy"},
		{[]string{"averagely", "--stability-size", "64"}, 2, "QxC"},
		{[]string{"nosuch"}, 1, `plugin "nosuch": no file`},
		{[]string{"sticky", "--vectors", vectorsFile}, 1, "strategy"},
	} {
		_, stderr, status := checkRun(t, c.args...)
		if status != c.status || !strings.Contains(stderr, c.want) {
			t.Errorf("check %q: status %d, stderr %q; want %d and %q", c.args, status, stderr, c.status, c.want)
		}
	}
}

// TestCheckRoomsVectorsCanFail: `allocd check --vectors` with another strategy's room vectors (the
// nearby plugin against MACHINE_ROOM's, which it reads no set of rooms for) fails the vectors
// check with exit status 1.
func TestCheckRoomsVectorsCanFail(t *testing.T) {
	stdout, stderr, status := checkRun(t, "nearby", "--scenarios", "2", "--json", "--vectors", roomsVectorsFile, "--strategy", "machine_room")
	if status != 1 {
		t.Fatalf("exit status %d\n%s\n%s", status, stdout, stderr)
	}
	if r := parseReport(t, stdout); r.status(harness.CheckVectors) != harness.Fail || r.status(harness.CheckErrors) != harness.Pass {
		t.Fatalf("checks %+v", r.Checks)
	}
}
