package server_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/allocd/allocd/autoscale"
	"github.com/allocd/allocd/coordinator"
)

const scaledT = `{"brokers":[{"name":"broker-a","readQueues":1,"writeQueues":1}],
	"autoscale":{"enabled":true,"min":1,"max":64,"expandWriteDelay":"10s","maxConfirmWait":"60s","shrinkReadDelay":"5m","shrinkStableFor":"60s"}}`

// status is autoscale.Status as a client reads it (StepKind has no UnmarshalText).
type status struct {
	Brokers   []autoscale.Broker
	Target    int
	Group     string
	GroupSize int
	Pending   *struct {
		Phase         autoscale.Phase
		Kind          string
		To            int
		Wait          string
		Unconfirmed   []string
		Blockers      []autoscale.Blocker
		BlockedQueues int
	}
}

type topicView struct {
	coordinator.Topic
	Autoscaling *status `json:"autoscaling"`
}

func TestAutoscalePolicyAndStatus(t *testing.T) {
	e := newEnv(t, nil)
	var topic coordinator.Topic
	if code := e.do("PUT", "/v1/topics/T", scaledT, &topic); code != http.StatusCreated {
		t.Fatalf("PUT: %d", code)
	}
	want := autoscale.DefaultPolicy()
	want.Enabled, want.Max = true, 64
	if topic.Autoscale == nil || *topic.Autoscale != want {
		t.Fatalf("stored policy %+v, want %+v", topic.Autoscale, want)
	}
	e.do("PUT", "/v1/groups/g", `{"strategy":"averagely"}`, nil)
	for _, cid := range []string{"c1", "c2", "c3"} {
		e.do("POST", "/v1/groups/g/heartbeat", `{"cid":"`+cid+`","topics":["T"]}`, nil)
	}
	e.tick(0)
	var v topicView
	if code := e.do("GET", "/v1/topics/T", "", &v); code != http.StatusOK || v.Autoscaling == nil {
		t.Fatalf("GET: %d %+v", code, v)
	}
	if b := v.Brokers[0]; b.ReadQueues != 3 || b.WriteQueues != 1 || v.Autoscale == nil {
		t.Fatalf("counts after three joined: %+v", v.Topic)
	}
	s := v.Autoscaling
	if s.Target != 3 || s.Group != "g" || s.Pending == nil || s.Pending.Phase != autoscale.RaiseWrite || len(s.Pending.Unconfirmed) != 3 || s.Pending.Wait == "" {
		t.Fatalf("status: %+v %+v", s, s.Pending)
	}
	// The members apply generation 1 and say so; offsets ride along.
	e.tick(time.Second)
	for _, cid := range []string{"c1", "c2", "c3"} {
		e.do("POST", "/v1/groups/g/heartbeat", `{"cid":"`+cid+`","topics":["T"],"generations":{"T":1},
			"offsets":{"T":[{"brokerName":"broker-a","queueId":0,"committed":5,"max":7,"lastWrite":"2024-12-31T23:00:00Z"}]}}`, nil)
	}
	if v = e.view(); len(v.Autoscaling.Pending.Unconfirmed) != 0 {
		t.Fatalf("unconfirmed after the members applied generation 1: %+v", v.Autoscaling.Pending)
	}
	e.tick(9 * time.Second)
	if v = e.view(); v.Brokers[0].WriteQueues != 3 || v.Autoscaling.Pending != nil {
		t.Fatalf("after expandWriteDelay: %+v %+v", v.Topic, v.Autoscaling)
	}
	// A re-declaration with the same policy keeps the scaled counts.
	if e.do("PUT", "/v1/topics/T", scaledT, &topic); topic.Brokers[0].ReadQueues != 3 {
		t.Fatalf("declared again: %+v", topic)
	}
	var list struct{ Topics []coordinator.Topic }
	if e.do("GET", "/v1/topics", "", &list); len(list.Topics) != 1 || list.Topics[0].Autoscale == nil {
		t.Fatalf("list: %+v", list)
	}
}

func TestOffsetsRoute(t *testing.T) {
	e := newEnv(t, nil)
	e.do("PUT", "/v1/topics/T", `{"brokers":[{"name":"broker-a","readQueues":3,"writeQueues":3}],"autoscale":{"enabled":true,"shrinkStableFor":"0s","shrinkReadDelay":"1m"}}`, nil)
	e.do("PUT", "/v1/groups/g", `{"strategy":"averagely"}`, nil)
	e.do("POST", "/v1/groups/g/heartbeat", `{"cid":"c1","topics":["T"]}`, nil)
	e.tick(0)
	if v := e.view(); v.Brokers[0].WriteQueues != 1 || v.Brokers[0].ReadQueues != 3 {
		t.Fatalf("one member, shrinkStableFor 0: %+v", v.Topic)
	}
	// A broker's max offsets, then the group's committed offsets, one queue behind.
	var s status
	if code := e.do("POST", "/v1/topics/T/offsets", `{"offsets":[{"brokerName":"broker-a","queueId":1,"max":120,"lastWrite":"2024-12-31T23:00:00Z"},{"brokerName":"broker-a","queueId":2,"max":120,"lastWrite":"2024-12-31T23:00:00Z"}]}`, &s); code != http.StatusOK || s.Pending == nil {
		t.Fatalf("broker report: %d %+v", code, s)
	}
	if code := e.do("POST", "/v1/topics/T/offsets", `{"group":"g","offsets":[{"brokerName":"broker-a","queueId":1,"committed":120,"max":120},{"brokerName":"broker-a","queueId":2,"committed":100}]}`, &s); code != http.StatusOK {
		t.Fatalf("group report: %d", code)
	}
	e.tick(time.Minute)
	v := e.view()
	p := v.Autoscaling.Pending
	if v.Brokers[0].ReadQueues != 3 || p == nil || p.BlockedQueues != 1 || len(p.Blockers) != 1 ||
		p.Blockers[0] != (autoscale.Blocker{Broker: "broker-a", Queue: 2, Group: "g", Behind: 20, Reason: p.Blockers[0].Reason}) ||
		!strings.Contains(p.Wait, "1 queue not drained") {
		t.Fatalf("blocked read drop: %+v %+v", v.Topic, p)
	}
	e.do("POST", "/v1/topics/T/offsets", `{"group":"g","offsets":[{"brokerName":"broker-a","queueId":2,"committed":120,"max":120}]}`, nil)
	e.tick(time.Minute)
	if v = e.view(); v.Brokers[0].ReadQueues != 1 || v.Autoscaling.Pending != nil {
		t.Fatalf("after the drain: %+v %+v", v.Topic, v.Autoscaling.Pending)
	}
	_, metrics := get(t, e.ts.URL+"/metrics")
	for _, want := range []string{
		`allocd_autoscale_steps_total{direction="down",kind="set-read",topic="T"} 1`,
		`allocd_autoscale_events_total{kind="not-drained",topic="T"} 1`,
		`allocd_autoscale_blocked_queues{topic="T"} 0`,
		`allocd_http_requests_total{code="200",route="POST /v1/topics/{topic}/offsets"} 3`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// view is GET /v1/topics/T, decoded afresh.
func (e *env) view() topicView {
	e.t.Helper()
	var v topicView
	if code := e.do("GET", "/v1/topics/T", "", &v); code != http.StatusOK {
		e.t.Fatalf("GET /v1/topics/T: %d", code)
	}
	return v
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, b.String()
}

func TestAutoscaleValidation(t *testing.T) {
	e := newEnv(t, nil)
	brokers := `"brokers":[{"name":"a","readQueues":1,"writeQueues":1}]`
	for _, tc := range []struct{ body, want string }{
		{`{` + brokers + `,"autoscale":{"enabled":true,"shrinkReadDlay":"5m"}}`, `autoscale: unknown field "shrinkReadDlay"`},
		{`{` + brokers + `,"autoscale":{"expandWriteDelay":"soon"}}`, `expandWriteDelay "soon" is not a duration`},
		{`{` + brokers + `,"autoscale":{"min":0}}`, "min 0 out of range"},
		{`{` + brokers + `,"autoscale":{"max":100000}}`, "max 100000 out of range"},
		{`{` + brokers + `,"autoscale":{"max":2000}}`, "max 2000 out of range: a broker has at most 1024 queues"},
		{`{` + brokers + `,"autoscale":{"min":"2"}}`, `field "min": JSON string where an integer is wanted`},
		{`{` + brokers + `,"autoscale":true}`, "JSON bool where an object is wanted"},
		{`{"brokers":[{"name":"a","readQueues":1,"writeQueues":2}],"autoscale":{}}`, "writeQueues 2 above readQueues 1"},
	} {
		e.expectError("PUT", "/v1/topics/T", tc.body, http.StatusBadRequest, tc.want)
	}
	e.expectError("GET", "/v1/topics/T", "", http.StatusNotFound, `topic "T" not found`)

	e.do("PUT", "/v1/topics/T", scaledT, nil)
	e.do("PUT", "/v1/topics/U", `{`+brokers+`}`, nil)
	e.do("PUT", "/v1/groups/g", `{"strategy":"averagely"}`, nil)
	for _, tc := range []struct {
		path, body string
		status     int
		want       string
	}{
		{"/v1/topics/nosuch/offsets", `{"offsets":[]}`, http.StatusNotFound, `topic "nosuch" not found`},
		{"/v1/topics/U/offsets", `{"offsets":[]}`, http.StatusConflict, `topic "U" has no autoscale policy`},
		{"/v1/topics/T/offsets", `{"group":"a b","offsets":[]}`, http.StatusBadRequest, `group name "a b"`},
		{"/v1/topics/T/offsets", `{"offsets":[{"brokerName":"a","queueId":-1}]}`, http.StatusBadRequest, "queueId -1 is outside"},
		{"/v1/topics/T/offsets", `{"offsets":[{"brokerName":"a","queue":1}]}`, http.StatusBadRequest, `unknown field "queue"`},
		{"/v1/topics/T/offsets", `{"offsets":[{"brokerName":"a","queueId":1,"lastWrite":"yesterday"}]}`, http.StatusBadRequest, "yesterday"},
		{"/v1/topics/T/offsets", `{"offsets":[{"brokerName":"a","queueId":1,"max":-5}]}`, http.StatusBadRequest, "max -5"},
		{"/v1/groups/g/heartbeat", `{"cid":"c","offsets":{"T":[{"brokerName":"","queueId":1}]}}`, http.StatusBadRequest, "offsets of topic T[0]: broker name"},
		{"/v1/groups/g/heartbeat", `{"cid":"c","offsets":{"T":[{"brokerName":"a","queueId":"1"}]}}`, http.StatusBadRequest, `"offsets.queueId": JSON string where an integer is wanted`},
	} {
		e.expectError("POST", tc.path, tc.body, tc.status, tc.want)
	}
	e.expectError("GET", "/v1/topics/T/offsets", "", http.StatusMethodNotAllowed, "allowed: POST")
	// Offsets of a queue the topic does not have are accepted and ignored.
	var s status
	if code := e.do("POST", "/v1/topics/T/offsets", `{"offsets":[{"brokerName":"other","queueId":1,"max":3}]}`, &s); code != http.StatusOK || !slices.Equal(s.Brokers, []autoscale.Broker{{Name: "broker-a", Read: 1, Write: 1}}) {
		t.Fatalf("offsets of another broker: %d %+v", code, s)
	}
}
