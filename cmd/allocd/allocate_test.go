package main_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/internal/wasmbuild"
	"github.com/allocd/allocd/plugins/rocketmq"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(fleetChildEnv); spec != "" {
		os.Exit(runFleetChild(spec)) // a load generator of BenchmarkFleet
	}
	code := m.Run()
	wasmbuild.Cleanup()
	os.Exit(code)
}

// allocate runs the real binary over lines and returns its answer lines; it must exit 0.
func allocate(t *testing.T, stdin string, args ...string) []string {
	t.Helper()
	lines, stderr, status := allocateStatus(t, stdin, args...)
	if status != 0 {
		t.Fatalf("allocd allocate %v: exit status %d\n%s", args, status, stderr)
	}
	return lines
}

// allocateStatus runs the real binary over lines and returns its answer lines, its standard
// error and its exit status.
func allocateStatus(t *testing.T, stdin string, args ...string) (lines []string, stderr string, status int) {
	t.Helper()
	stdout, stderr, status := runTool(t, "allocate", stdin, args...)
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines, stderr, status
}

// vectorLine is the `allocd allocate` request line of vector v under binding b: the fields the
// README documents (labels, config), for v's cid alone or, with whole, for the whole group.
func vectorLine(v *rocketmq.Vector, b rocketmq.Binding, whole bool) string {
	line := map[string]any{"group": v.Group, "mqAll": v.MQAll, "cidAll": v.CIDAll}
	if !whole {
		line["cid"] = v.CID
	}
	if b.Config != nil {
		line["config"] = b.Config
	}
	if b.QueueLabels != nil {
		line["queueLabels"] = b.QueueLabels
	}
	if b.ConsumerLabels != nil {
		line["consumerLabels"] = b.ConsumerLabels
	}
	text, _ := json.Marshal(line)
	return string(text)
}

// answer is one answer line of `allocd allocate`.
type answer struct {
	Result     []abi.Queue            `json:"result"`
	Assignment map[string][]abi.Queue `json:"assignment"`
	Error      *string                `json:"error"`
	Errors     map[string]string      `json:"errors"`
}

// TestAllocateMatchesJavaVectors feeds every recorded RocketMQ Java vector, of both vector files,
// to the built-in plugin of its strategy through `allocd allocate`, each line carrying its
// strategy's settings as labels and config, and requires the same queues in the same order, and
// an error exactly where Java threw. Every group is asked once more as a whole.
func TestAllocateMatchesJavaVectors(t *testing.T) {
	var vectors []rocketmq.Vector
	for _, f := range []string{"../../testdata/rocketmq-java-vectors-small.jsonl", "../../testdata/rocketmq-java-vectors-rooms-small.jsonl"} {
		vs, err := rocketmq.LoadVectors(f)
		if err != nil {
			t.Fatal(err)
		}
		vectors = append(vectors, vs...)
	}
	bindings := rocketmq.Bindings(vectors)
	byPlugin := map[string][]int{}
	for i := range vectors {
		byPlugin[bindings[i].Plugin] = append(byPlugin[bindings[i].Plugin], i)
	}
	if len(byPlugin) != 6 {
		t.Fatalf("vectors of %d plugins, want 6: %v", len(byPlugin), byPlugin)
	}
	for plugin, idx := range byPlugin {
		t.Run(plugin, func(t *testing.T) {
			var in strings.Builder
			wholeFor := map[rocketmq.GroupKey]int{} // group -> its whole-group line
			var wholes []int                        // the vector each whole-group line was built from
			for _, i := range idx {
				in.WriteString(vectorLine(&vectors[i], bindings[i], false) + "\n")
			}
			for _, i := range idx {
				if k := vectors[i].Key(); vectors[i].MemberOfCidAll {
					if _, ok := wholeFor[k]; !ok {
						wholeFor[k] = len(wholes)
						wholes = append(wholes, i)
						in.WriteString(vectorLine(&vectors[i], bindings[i], true) + "\n")
					}
				}
			}
			out, stderr, status := allocateStatus(t, in.String(), "--plugin", plugin, "--keep-going")
			if status != 0 {
				t.Fatalf("exit status %d with --keep-going\n%s", status, stderr)
			}
			if len(out) != len(idx)+len(wholes) {
				t.Fatalf("%d answers for %d requests", len(out), len(idx)+len(wholes))
			}
			parse := func(k int) answer {
				var a answer
				if err := json.Unmarshal([]byte(out[k]), &a); err != nil {
					t.Fatalf("answer %d: %v: %s", k, err, out[k])
				}
				return a
			}
			for k, i := range idx {
				v := &vectors[i]
				a := parse(k)
				if d := v.Mismatch(a.Result, a.Error != nil, deref(a.Error)); d != "" {
					t.Errorf("line %d (%s): %s", v.Line, v.Family, d)
				}
				if !v.MemberOfCidAll {
					continue
				}
				w := parse(len(idx) + wholeFor[v.Key()])
				msg, failed := w.Errors[v.CID]
				if d := v.Mismatch(w.Assignment[v.CID], failed, msg); d != "" {
					t.Errorf("line %d (%s), whole group: %s", v.Line, v.Family, d)
				}
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestAllocateWholeGroupAndBadLines(t *testing.T) {
	mq := `[{"topic":"T","brokerName":"b","queueId":2},{"topic":"T","brokerName":"b","queueId":0},{"topic":"T","brokerName":"b","queueId":1}]`
	in := strings.Join([]string{
		`{"group":"g","mqAll":` + mq + `,"cidAll":["c2","c1"]}`,
		`{"group":"g","cid":"c1","mqAll":` + mq + `,"cidAll":["c1","c2"]} trailing`,
		`{"group":"g","cid":"zz","mqAll":` + mq + `,"cidAll":["c1","c2"]}`,
		``,
		`{"group":"g","mqAll":[],"cidAll":["c1"]}`,
	}, "\n")
	want := []string{
		`{"assignment":{"c1":[{"topic":"T","brokerName":"b","queueId":0},{"topic":"T","brokerName":"b","queueId":2}],"c2":[{"topic":"T","brokerName":"b","queueId":1}]}}`,
		`{"error":"line 2: invalid request: more than one JSON value"}`,
		`{"result":[]}`,
		`{"error":"consumer \"c1\": mqAll is null or mqAll empty","errors":{"c1":"mqAll is null or mqAll empty"}}`,
	}
	// Every line is answered; the failures make the exit status 1, and stderr says how many.
	out, stderr, status := allocateStatus(t, in, "--plugin", "circle")
	if !slices.Equal(out, want) {
		t.Fatalf("answers:\n%s\nwant:\n%s", strings.Join(out, "\n"), strings.Join(want, "\n"))
	}
	if status != 1 || !strings.Contains(stderr, "2 of 4 lines failed; the first: line 2: invalid request: more than one JSON value") {
		t.Fatalf("exit status %d, stderr %q; want 1 and the count of failed lines", status, stderr)
	}
	// --keep-going only reports.
	out, stderr, status = allocateStatus(t, in, "--plugin", "circle", "--keep-going")
	if status != 0 || !slices.Equal(out, want) || stderr != "" {
		t.Fatalf("--keep-going: exit status %d, stderr %q, answers:\n%s", status, stderr, strings.Join(out, "\n"))
	}
	if _, _, status := allocateStatus(t, strings.Join(slices.Delete(strings.Split(in, "\n"), 1, 2), "\n")+"\n", "--plugin", "averagely"); status != 1 {
		t.Fatalf("a line the plugin failed on: exit status %d, want 1", status)
	}
}

// TestAllocateLabelsConfigAndPrevOwners: the optional fields of a request line reach the plugin
// (labels, previous owners, a config object over --config), values that are not strings arrive as
// their JSON text, and malformed fields fail their line with a message naming them.
func TestAllocateLabelsConfigAndPrevOwners(t *testing.T) {
	mq := `[{"topic":"T","brokerName":"IDC1@b","queueId":0},{"topic":"T","brokerName":"IDC1@b","queueId":1},{"topic":"T","brokerName":"IDC2@b","queueId":0}]`
	q := func(broker string, id int) string {
		return fmt.Sprintf(`{"topic":"T","brokerName":%q,"queueId":%d}`, broker, id)
	}
	list := "[" + q("IDC2@b", 0) + "," + q("IDC1@b", 0) + "," + q("IDC2@b", 0) + "," + q("gone", 7) + "]"
	for _, c := range []struct {
		name, plugin string
		args         []string
		line, want   string
	}{
		{"config: a label as a JSON string", "config", nil,
			`{"group":"g","mqAll":` + mq + `,"cidAll":["c1","c2"],"consumerLabels":[{"queues":` + strconv.Quote(list) + `},null]}`,
			`{"assignment":{"c1":[` + q("IDC2@b", 0) + "," + q("IDC1@b", 0) + "," + q("IDC2@b", 0) + `],"c2":[]}}`},
		{"config: a label as raw JSON", "config", nil,
			`{"group":"g","cid":"c1","mqAll":` + mq + `,"cidAll":["c1","c2"],"consumerLabels":[{"queues":` + list + `},{}]}`,
			`{"result":[` + q("IDC2@b", 0) + "," + q("IDC1@b", 0) + "," + q("IDC2@b", 0) + `]}`},
		{"machineroom: config as raw JSON", "machineroom", nil,
			`{"group":"g","mqAll":` + mq + `,"cidAll":["c1","c2"],"config":{"consumeridcs":["IDC1"]}}`,
			`{"assignment":{"c1":[` + q("IDC1@b", 0) + `],"c2":[` + q("IDC1@b", 1) + `]}}`},
		{"machineroom: the line's config over --config", "machineroom", []string{"--config", `consumeridcs=["IDC1"]`},
			`{"group":"g","cid":"c1","mqAll":` + mq + `,"cidAll":["c1"],"config":{"consumeridcs":"[\"IDC2\"]"}}`,
			`{"result":[` + q("IDC2@b", 0) + `]}`},
		{"machineroom: null removes a --config key", "machineroom", []string{"--config", `consumeridcs=["IDC1"]`},
			`{"group":"g","cid":"c1","mqAll":` + mq + `,"cidAll":["c1"],"config":{"consumeridcs":null}}`,
			`NullPointerException`},
		{"machineroom: a vector's CONFIG list is not a config", "machineroom", []string{"--config", `consumeridcs=["IDC1"]`},
			`{"group":"g","cid":"c1","mqAll":` + mq + `,"cidAll":["c1"],"config":[0,1]}`,
			`{"result":[` + q("IDC1@b", 0) + "," + q("IDC1@b", 1) + `]}`},
		{"nearby: zones from labels", "nearby", nil,
			`{"group":"g","mqAll":` + mq + `,"cidAll":["c1","c2"],"queueLabels":[{"zone":"z1"},{"zone":"z1"},{"zone":"z2"}],"consumerLabels":[{"zone":"z1"},{"zone":"z3"}],"config":{"inner":"circle"}}`,
			`{"assignment":{"c1":[` + q("IDC1@b", 0) + "," + q("IDC1@b", 1) + "," + q("IDC2@b", 0) + `],"c2":[]}}`},
		{"nearby: a queue without a zone", "nearby", nil,
			`{"group":"g","cid":"c1","mqAll":` + mq + `,"cidAll":["c1"],"queueLabels":[{"zone":"z1"},null,{"zone":""}],"consumerLabels":[{"zone":"z1"}]}`,
			`{"error":"Machine room is null for mq MessageQueue [topic=T, brokerName=IDC1@b, queueId=1]"}`},
		{"sticky: previous owners kept", "sticky", nil,
			`{"group":"g","mqAll":` + mq + `,"cidAll":["c1","c2"],"prevOwners":[1,1,0]}`,
			`{"assignment":{"c1":[` + q("IDC2@b", 0) + `],"c2":[` + q("IDC1@b", 0) + "," + q("IDC1@b", 1) + `]}}`},
		{"sticky: previous owners kept, the other way", "sticky", nil,
			`{"group":"g","mqAll":` + mq + `,"cidAll":["c1","c2"],"prevOwners":[0,0,1]}`,
			`{"assignment":{"c1":[` + q("IDC1@b", 0) + "," + q("IDC1@b", 1) + `],"c2":[` + q("IDC2@b", 0) + `]}}`},
		{"bad: labels not parallel", "nearby", nil,
			`{"group":"g","cid":"c1","mqAll":` + mq + `,"cidAll":["c1"],"queueLabels":[{"zone":"z1"}]}`,
			`{"error":"line 1: invalid request: \"queueLabels\" has 1 entries for 3 queues in mqAll"}`},
		{"bad: a previous owner out of range", "sticky", nil,
			`{"group":"g","cid":"c1","mqAll":` + mq + `,"cidAll":["c1"],"prevOwners":[0,-1,1]}`,
			`{"error":"line 1: invalid request: prevOwners[2] is 1: not -1 nor an index into cidAll [0,1)"}`},
		{"bad: previous owners not parallel", "sticky", nil,
			`{"group":"g","cid":"c1","mqAll":` + mq + `,"cidAll":["c1"],"prevOwners":[0]}`,
			`{"error":"line 1: invalid request: \"prevOwners\" has 1 entries for 3 queues in mqAll"}`},
		{"bad: config not an object", "averagely", nil,
			`{"group":"g","cid":"c1","mqAll":` + mq + `,"cidAll":["c1"],"config":"vnodes=3"}`,
			`{"error":"line 1: invalid request: \"config\" is not an object`},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, stderr, status := allocateStatus(t, c.line+"\n", append([]string{"--plugin", c.plugin}, c.args...)...)
			if len(out) != 1 {
				t.Fatalf("answers %q, stderr %s", out, stderr)
			}
			if !strings.Contains(out[0], c.want) {
				t.Fatalf("answer %s\nwant %s", out[0], c.want)
			}
			if failed := strings.Contains(out[0], `"error"`); failed != (status == 1) {
				t.Fatalf("exit status %d for answer %s", status, out[0])
			}
		})
	}
}

func TestAllocateRefusesUnknownPlugin(t *testing.T) {
	cmd := exec.Command(wasmbuild.Allocd(t), "allocate", "--plugin", "nosuch", "--plugins-dir", t.TempDir())
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `plugin "nosuch": no file`) {
		t.Fatalf("err = %v, output %s", err, out)
	}
}
