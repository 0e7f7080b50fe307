package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/allocd/allocd/coordinator"
	"github.com/allocd/allocd/internal/nativestrategy"
	"github.com/allocd/allocd/server"
	"github.com/allocd/allocd/store"
)

// Each heartbeat of a batch is answered, in its place, as POST /v1/groups/G/heartbeat answers
// it alone: the same assignment, or the same status and error.
func TestHeartbeatBatchAnswersAsAlone(t *testing.T) {
	e := newEnv(t, nil)
	e.do("PUT", "/v1/topics/T", `{"brokers":[{"name":"broker-a","readQueues":4,"writeQueues":4}]}`, nil)
	e.do("PUT", "/v1/groups/g", `{"strategy":"averagely"}`, nil)
	e.do("PUT", "/v1/groups/h", `{"strategy":"averagely"}`, nil)
	e.do("POST", "/v1/groups/g/heartbeat", `{"cid":"c1","topics":["T"]}`, nil)
	e.do("POST", "/v1/groups/g/heartbeat", `{"cid":"c2","topics":["T"]}`, nil)
	e.do("POST", "/v1/groups/h/heartbeat", `{"cid":"c1","topics":["T"],"labels":{"zone":"a"}}`, nil)
	e.tick(time.Second)
	items := []struct{ group, hb string }{
		{"g", `{"cid":"c1","topics":["T"],"generations":{"T":1},"confirms":true}`},
		{"h", `{"cid":"c1","topics":["T"],"labels":{"zone":"a"}}`},
		{"g", `{"cid":"c2","topics":["T"],"generations":{"T":1}}`},
		{"nosuch", `{"cid":"c1","topics":["T"]}`},
		{"bad name", `{"cid":"c1","topics":["T"]}`},
		{"g", `{"cid":"","topics":["T"]}`},
		{"g", `{"cid":1}`},
		{"g", `{"cid":"c1","extra":true}`},
		{"g", `5`},
		{"g", `null`},
		{"g", `{"cid":"c\u00e9","topics":["T"]}`},
	}
	var parts []string
	for _, it := range items {
		parts = append(parts, fmt.Sprintf(`{"group":%q,"heartbeat":%s}`, it.group, it.hb))
	}
	var got struct {
		Answers []struct {
			Status int             `json:"status"`
			Answer json.RawMessage `json:"answer"`
			Error  string          `json:"error"`
		} `json:"answers"`
	}
	if code := e.do("POST", "/v1/heartbeats", `{"heartbeats":[`+strings.Join(parts, ",")+`]}`, &got); code != http.StatusOK || len(got.Answers) != len(items) {
		t.Fatalf("batch: %d, %d answers for %d heartbeats", code, len(got.Answers), len(items))
	}
	for i, it := range items {
		path := "/v1/groups/" + it.group + "/heartbeat"
		w := httptest.NewRecorder()
		e.s.Handler().ServeHTTP(w, httptest.NewRequest("POST", strings.ReplaceAll(path, " ", "%20"), strings.NewReader(strings.ReplaceAll(it.hb, "null", ""))))
		a := got.Answers[i]
		if a.Status != w.Code {
			t.Errorf("%s %s: status %d in the batch, %d alone (%s)", it.group, it.hb, a.Status, w.Code, w.Body)
			continue
		}
		if w.Code == http.StatusOK {
			if strings.TrimSpace(string(a.Answer)) != strings.TrimSpace(w.Body.String()) {
				t.Errorf("%s %s: answer %s in the batch, %s alone", it.group, it.hb, a.Answer, w.Body)
			}
			continue
		}
		var alone struct{ Error string }
		json.Unmarshal(w.Body.Bytes(), &alone)
		if a.Error != alone.Error || a.Error == "" || a.Answer != nil {
			t.Errorf("%s %s: error %q (answer %s) in the batch, %q alone", it.group, it.hb, a.Error, a.Answer, alone.Error)
		}
	}
	if n := batchedCount(t, e, "200"); n != 4 {
		t.Errorf("allocd_http_batched_heartbeats_total{code=200} = %v, want 4", n)
	}
	mfs, _ := e.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "allocd_http_batched_heartbeat_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			if n := h.GetSampleCount(); n != uint64(len(items)) {
				t.Errorf("allocd_http_batched_heartbeat_seconds counted %d heartbeats, want %d", n, len(items))
			}
			// A bound at 10 ms, the fleet's p99 goal, read by BenchmarkFleet.
			if !slices.ContainsFunc(h.GetBucket(), func(b *dto.Bucket) bool { return b.GetUpperBound() == 0.01 }) {
				t.Errorf("allocd_http_batched_heartbeat_seconds has no bucket bound at 10 ms")
			}
		}
	}
}

func TestHeartbeatBatchRefusals(t *testing.T) {
	e := newEnv(t, nil)
	e.expectError("POST", "/v1/heartbeats", `{"heartbeats":[{"group":"g","heartbeat":{},"x":1}]}`, 400, `unknown field "x"`)
	e.expectError("POST", "/v1/heartbeats", `{"heartbeats":{}}`, 400, `field "heartbeats"`)
	e.expectError("POST", "/v1/heartbeats", `[]`, 400, "want an object")
	e.expectError("POST", "/v1/heartbeats", ``, 400, "empty")
	e.expectError("GET", "/v1/heartbeats", ``, 405, "allowed: POST")
	many := `{"heartbeats":[` + strings.Repeat(`{},`, server.MaxHeartbeatBatch) + `{}]}`
	e.expectError("POST", "/v1/heartbeats", many, 400, "more than 1000")
	// The body limit (4,096 bytes in this env) holds for the batch as a whole.
	e.expectError("POST", "/v1/heartbeats", `{"heartbeats":[{"group":"`+strings.Repeat("g", 5000)+`"}]}`, 413, "exceeds 4096 bytes")
	var got struct{ Answers []any }
	if code := e.do("POST", "/v1/heartbeats", `{"heartbeats":[]}`, &got); code != 200 || got.Answers == nil || len(got.Answers) != 0 {
		t.Errorf("empty batch: %d %v", code, got.Answers)
	}
}

func batchedCount(t *testing.T, e *env, code string) float64 {
	t.Helper()
	return counter(t, e, "allocd_http_batched_heartbeats_total", code)
}

// counter is the value of the counter name{code=code} (0 when not counted yet).
func counter(t *testing.T, e *env, name, code string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() == code {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// Any body is answered 200 with one answer per heartbeat, or refused with a 4xx naming what
// was wrong; never a 5xx or a panic.
func FuzzHeartbeatBatch(f *testing.F) {
	for _, s := range []string{
		`{"heartbeats":[{"group":"g","heartbeat":{"cid":"c1","topics":["T"],"generations":{"T":1}}}]}`,
		`{"heartbeats":[{"group":"g","heartbeat":{"cid":"c1"}},{"group":"nosuch","heartbeat":{"cid":"c1"}}]}`,
		`{"heartbeats":[{"group":"g","heartbeat":null},{"group":"","heartbeat":5}]}`,
		`{"heartbeats":[{"group":"g","heartbeat":{"cid":"\ud800"}}]}`,
		`{"heartbeats":null}`,
		`{"heartbeats":[]} x`,
	} {
		f.Add([]byte(s))
	}
	st, err := store.Open(f.TempDir(), store.Options{NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	defer st.Close()
	c, err := coordinator.New(coordinator.Options{Store: st, Allocator: nativestrategy.Allocator{}, SessionTimeout: time.Hour})
	if err != nil {
		f.Fatal(err)
	}
	s, err := server.New(server.Options{Coordinator: c, MaxBody: 1 << 16})
	if err != nil {
		f.Fatal(err)
	}
	c.PutTopic("T", []coordinator.Broker{{Name: "b", ReadQueues: 4, WriteQueues: 4}})
	c.PutGroup("g", coordinator.Binding{Strategy: "averagely"})
	f.Fuzz(func(t *testing.T, body []byte) {
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, httptest.NewRequest("POST", "/v1/heartbeats", bytes.NewReader(body)))
		var got struct {
			Answers []struct {
				Status int    `json:"status"`
				Error  string `json:"error"`
			} `json:"answers"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
			t.Fatalf("%d answer is not JSON: %v %q", w.Code, err, w.Body)
		}
		switch {
		case w.Code == http.StatusOK:
			var req struct{ Heartbeats []json.RawMessage }
			if json.Unmarshal(body, &req) != nil || len(got.Answers) != len(req.Heartbeats) {
				t.Fatalf("200 with %d answers for %q", len(got.Answers), body)
			}
			for _, a := range got.Answers {
				if a.Status >= 500 || a.Status < 200 || (a.Status != 200) != (a.Error != "") {
					t.Fatalf("answer %+v for %q", a, body)
				}
			}
		case w.Code >= 400 && w.Code < 500 && got.Error != "":
		default:
			t.Fatalf("%d %q for %q", w.Code, w.Body, body)
		}
	})
}
