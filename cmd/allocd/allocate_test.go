package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/internal/wasmbuild"
	"github.com/allocd/allocd/plugins/rocketmq"
)

func TestMain(m *testing.M) {
	code := m.Run()
	wasmbuild.Cleanup()
	os.Exit(code)
}

// allocate runs the real binary over lines and returns its answer lines.
func allocate(t *testing.T, stdin string, args ...string) []string {
	t.Helper()
	cmd := exec.Command(wasmbuild.Allocd(t), append([]string{"allocate", "--plugins-dir", wasmbuild.BuiltinPlugins(t),
		"--cache-dir", filepath.Join(os.TempDir(), "allocd-test-cache")}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("allocd allocate %v: %v\n%s", args, err, stderr.String())
	}
	var lines []string
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

// TestAllocateMatchesJavaVectors feeds every recorded RocketMQ Java vector to the built-in
// plugin of its strategy through `allocd allocate`, and requires the same queues in the same
// order, and an error exactly where Java threw.
func TestAllocateMatchesJavaVectors(t *testing.T) {
	vectors, err := rocketmq.LoadVectors("../../testdata/rocketmq-java-vectors-small.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	type batch struct {
		plugin string
		vnodes string
	}
	batches := map[batch][]rocketmq.Vector{}
	for _, v := range vectors {
		b := batch{plugin: map[string]string{"AVG": "averagely", "AVG_BY_CIRCLE": "circle", "CONSISTENT_HASH": "hash"}[v.Strategy]}
		if v.Strategy == "CONSISTENT_HASH" && !v.VnodesDefault {
			b.vnodes = fmt.Sprint(v.Vnodes)
		}
		batches[b] = append(batches[b], v)
	}
	if len(batches) < 7 {
		t.Fatalf("only %d plugin configurations in the vectors", len(batches))
	}
	for b, vs := range batches {
		t.Run(b.plugin+"/vnodes="+b.vnodes, func(t *testing.T) {
			var in strings.Builder
			for _, v := range vs {
				line, _ := json.Marshal(map[string]any{"group": v.Group, "cid": v.CID, "mqAll": v.MQAll, "cidAll": v.CIDAll})
				in.Write(line)
				in.WriteByte('\n')
			}
			args := []string{"--plugin", b.plugin}
			if b.vnodes != "" {
				args = append(args, "--config", "vnodes="+b.vnodes)
			}
			out := allocate(t, in.String(), args...)
			if len(out) != len(vs) {
				t.Fatalf("%d answers for %d requests", len(out), len(vs))
			}
			for i, v := range vs {
				var ans struct {
					Result []abi.Queue `json:"result"`
					Error  *string     `json:"error"`
				}
				if err := json.Unmarshal([]byte(out[i]), &ans); err != nil {
					t.Fatalf("line %d: %v: %s", v.Line, err, out[i])
				}
				if v.Error != "" {
					if ans.Error == nil || !strings.Contains(*ans.Error, v.WantError()) {
						t.Errorf("line %d (%s): answer %s, want error %q", v.Line, v.Family, out[i], v.WantError())
					}
					continue
				}
				if ans.Error != nil {
					t.Errorf("line %d (%s): error %q, want %v", v.Line, v.Family, *ans.Error, v.Result)
					continue
				}
				got := make([]int, len(ans.Result))
				for j, q := range ans.Result {
					got[j] = slices.IndexFunc(v.MQAll, func(m rocketmq.Queue) bool {
						return m.Topic == q.Topic && m.BrokerName == q.BrokerName && m.QueueID == q.QueueID
					})
				}
				if !slices.Equal(got, v.Result) {
					t.Errorf("line %d (%s): got %v, want %v", v.Line, v.Family, got, v.Result)
				}
			}
		})
	}
}

func TestAllocateWholeGroupAndBadLines(t *testing.T) {
	mq := `[{"topic":"T","brokerName":"b","queueId":2},{"topic":"T","brokerName":"b","queueId":0},{"topic":"T","brokerName":"b","queueId":1}]`
	out := allocate(t, strings.Join([]string{
		`{"group":"g","mqAll":` + mq + `,"cidAll":["c2","c1"]}`,
		`{"group":"g","cid":"c1","mqAll":` + mq + `,"cidAll":["c1","c2"]} trailing`,
		`{"group":"g","cid":"zz","mqAll":` + mq + `,"cidAll":["c1","c2"]}`,
		``,
		`{"group":"g","mqAll":[],"cidAll":["c1"]}`,
	}, "\n"), "--plugin", "circle")
	want := []string{
		`{"assignment":{"c1":[{"topic":"T","brokerName":"b","queueId":0},{"topic":"T","brokerName":"b","queueId":2}],"c2":[{"topic":"T","brokerName":"b","queueId":1}]}}`,
		`{"error":"line 2: invalid request: more than one JSON value"}`,
		`{"result":[]}`,
		`{"error":"consumer \"c1\": mqAll is null or mqAll empty","errors":{"c1":"mqAll is null or mqAll empty"}}`,
	}
	if !slices.Equal(out, want) {
		t.Fatalf("answers:\n%s\nwant:\n%s", strings.Join(out, "\n"), strings.Join(want, "\n"))
	}
}

func TestAllocateRefusesUnknownPlugin(t *testing.T) {
	cmd := exec.Command(wasmbuild.Allocd(t), "allocate", "--plugin", "nosuch", "--plugins-dir", t.TempDir())
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `plugin "nosuch": no file`) {
		t.Fatalf("err = %v, output %s", err, out)
	}
}
