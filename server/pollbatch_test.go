package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/allocd/allocd/server"
)

type pollAnswers struct {
	Answers []struct {
		Status int             `json:"status"`
		Answer json.RawMessage `json:"answer"`
		Error  string          `json:"error"`
	} `json:"answers"`
}

// pollBatch sends POST /v1/assignments with polls (JSON objects) in the background; the
// channel gets its answers.
func (e *env) pollBatch(polls ...string) <-chan pollAnswers {
	done := make(chan pollAnswers, 1)
	go func() {
		var got pollAnswers
		if code := e.do("POST", "/v1/assignments", `{"polls":[`+strings.Join(polls, ",")+`]}`, &got); code != http.StatusOK || len(got.Answers) != len(polls) {
			e.t.Errorf("poll batch: %d, %d answers for %d polls", code, len(got.Answers), len(polls))
		}
		done <- got
	}()
	return done
}

func receive(t *testing.T, ch <-chan pollAnswers) pollAnswers {
	t.Helper()
	select {
	case got := <-ch:
		return got
	case <-time.After(10 * time.Second):
		t.Fatal("the poll batch did not answer")
		return pollAnswers{}
	}
}

// Each poll of a batch that answers at once is answered, in its place, as GET
// /v1/groups/G/assignment answers it alone: the same assignment, or the same status and error;
// a poll that would still wait is 304.
func TestPollBatchAnswersAsAlone(t *testing.T) {
	e := newEnv(t, nil)
	e.do("PUT", "/v1/topics/T", `{"brokers":[{"name":"broker-a","readQueues":4,"writeQueues":4}]}`, nil)
	e.do("PUT", "/v1/groups/g", `{"strategy":"averagely"}`, nil)
	e.do("PUT", "/v1/groups/h", `{"strategy":"averagely"}`, nil)
	e.do("POST", "/v1/groups/g/heartbeat", `{"cid":"c1","topics":["T"]}`, nil)
	e.do("POST", "/v1/groups/g/heartbeat", `{"cid":"c2","topics":["T"]}`, nil)
	e.do("POST", "/v1/groups/h/heartbeat", `{"cid":"c1","topics":["T"]}`, nil)
	e.tick(time.Second)
	items := []struct{ poll, query string }{
		{`{"group":"g","cid":"c1"}`, "g/assignment?cid=c1"},
		{`{"group":"g","cid":"c2","topics":["T"],"after":0}`, "g/assignment?cid=c2&topic=T&after=0"},
		{`{"group":"h","cid":"c1","topics":["T","U"]}`, "h/assignment?cid=c1&topic=T&topic=U"},
		{`{"group":"g","cid":"c1","after":1,"wait":"0s"}`, "g/assignment?cid=c1&after=1&wait=0s"},
		{`{"group":"nosuch","cid":"c1"}`, "nosuch/assignment?cid=c1"},
		{`{"group":"g","cid":"c9"}`, "g/assignment?cid=c9"},
		{`{"group":"bad name","cid":"c1"}`, "bad%20name/assignment?cid=c1"},
		{`{"group":"g","cid":""}`, "g/assignment?cid="},
		{`{"group":"g","cid":"c1","topics":["a b"]}`, "g/assignment?cid=c1&topic=a%20b"},
		{`{"group":"g","cid":"c1","after":-2}`, "g/assignment?cid=c1&after=-2"},
		{`{"group":"g","cid":"c1","after":1,"wait":"soon"}`, "g/assignment?cid=c1&after=1&wait=soon"},
		{`{"group":"g","cid":"c1","after":1}`, ""}, // waits: 304
	}
	var polls []string
	for _, it := range items {
		polls = append(polls, it.poll)
	}
	got := receive(t, e.pollBatch(polls...))
	for i, it := range items {
		a := got.Answers[i]
		if it.query == "" {
			if a.Status != http.StatusNotModified || a.Answer != nil || a.Error != "" {
				t.Errorf("%s: %+v, want 304 alone", it.poll, a)
			}
			continue
		}
		w := httptest.NewRecorder()
		e.s.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/v1/groups/"+it.query, nil))
		if a.Status != w.Code {
			t.Errorf("%s: status %d in the batch, %d alone (%s)", it.poll, a.Status, w.Code, w.Body)
			continue
		}
		if w.Code == http.StatusOK {
			if strings.TrimSpace(string(a.Answer)) != strings.TrimSpace(w.Body.String()) {
				t.Errorf("%s: answer %s in the batch, %s alone", it.poll, a.Answer, w.Body)
			}
			continue
		}
		var alone struct{ Error string }
		json.Unmarshal(w.Body.Bytes(), &alone)
		// The batch names the field where the query names the parameter, and its value unquoted.
		plain := strings.NewReplacer("query parameter ", "", `"`, "")
		if a.Error == "" || a.Answer != nil || plain.Replace(a.Error) != plain.Replace(alone.Error) {
			t.Errorf("%s: error %q (answer %s) in the batch, %q alone", it.poll, a.Error, a.Answer, alone.Error)
		}
	}
	if n := counter(t, e, "allocd_http_batched_polls_total", "304"); n != 1 {
		t.Errorf("allocd_http_batched_polls_total{code=304} = %v, want 1", n)
	}
	if n := counter(t, e, "allocd_http_batched_polls_total", "404"); n != 2 {
		t.Errorf("allocd_http_batched_polls_total{code=404} = %v, want 2", n)
	}
}

// A batch waits while none of its polls would answer; a new generation of one group answers
// that group's polls, and the polls of the other group, still waiting, are 304.
func TestPollBatchWakesOnItsGroupsChanges(t *testing.T) {
	e := newEnv(t, nil)
	e.do("PUT", "/v1/topics/T", `{"brokers":[{"name":"broker-a","readQueues":4,"writeQueues":4}]}`, nil)
	for _, g := range []string{"g", "h", "x"} {
		e.do("PUT", "/v1/groups/"+g, `{"strategy":"averagely"}`, nil)
		e.do("POST", "/v1/groups/"+g+"/heartbeat", `{"cid":"c1","topics":["T"]}`, nil)
	}
	e.tick(time.Second)
	done := e.pollBatch(
		`{"group":"g","cid":"c1","after":1,"wait":"30s"}`,
		`{"group":"h","cid":"c1","after":1,"wait":"30s"}`,
	)
	waitFor(t, func() bool { return e.s.Waiting() > 0 })
	// A change to a group the batch does not poll leaves it waiting.
	e.do("POST", "/v1/groups/x/heartbeat", `{"cid":"c2","topics":["T"]}`, nil)
	e.tick(time.Second)
	select {
	case got := <-done:
		t.Fatalf("answered on another group's change: %+v", got)
	default:
	}
	e.do("POST", "/v1/groups/h/heartbeat", `{"cid":"c2","topics":["T"]}`, nil)
	e.tick(time.Second)
	got := receive(t, done)
	if got.Answers[0].Status != http.StatusNotModified {
		t.Errorf("g's poll: %+v, want 304", got.Answers[0])
	}
	var a struct{ Generations map[string]int64 }
	if json.Unmarshal(got.Answers[1].Answer, &a); got.Answers[1].Status != http.StatusOK || a.Generations["T"] != 2 {
		t.Errorf("h's poll: %+v, want generation 2", got.Answers[1])
	}
}

// Each poll keeps its own wait: the batch answers when the shortest ends, that poll with its
// unchanged assignment and the others 304. Draining answers every poll.
func TestPollBatchWaitsAndDrain(t *testing.T) {
	e := newEnv(t, nil)
	e.do("PUT", "/v1/topics/T", `{"brokers":[{"name":"broker-a","readQueues":4,"writeQueues":4}]}`, nil)
	e.do("PUT", "/v1/groups/g", `{"strategy":"averagely"}`, nil)
	e.do("POST", "/v1/groups/g/heartbeat", `{"cid":"c1","topics":["T"]}`, nil)
	e.do("POST", "/v1/groups/g/heartbeat", `{"cid":"c2","topics":["T"]}`, nil)
	e.tick(time.Second)
	start := time.Now()
	got := receive(t, e.pollBatch(
		`{"group":"g","cid":"c1","after":1,"wait":"30s"}`,
		`{"group":"g","cid":"c2","after":1,"wait":"100ms"}`,
	))
	if took := time.Since(start); took < 100*time.Millisecond || took > 5*time.Second {
		t.Errorf("answered after %v, want the shorter wait (100ms)", took)
	}
	var a struct{ Generations map[string]int64 }
	if json.Unmarshal(got.Answers[1].Answer, &a); got.Answers[0].Status != http.StatusNotModified || got.Answers[1].Status != http.StatusOK || a.Generations["T"] != 1 {
		t.Errorf("answers %+v, want 304 and c2's generation 1", got.Answers)
	}

	done := e.pollBatch(
		`{"group":"g","cid":"c1","after":1,"wait":"30s"}`,
		`{"group":"g","cid":"c2","after":1,"wait":"30s"}`,
	)
	waitFor(t, func() bool { return e.s.Waiting() > 0 })
	e.s.Drain()
	got = receive(t, done)
	for i, ans := range got.Answers {
		if ans.Status != http.StatusOK || ans.Answer == nil {
			t.Errorf("poll %d at drain: %+v, want its assignment", i, ans)
		}
	}
}

func TestPollBatchRefusals(t *testing.T) {
	e := newEnv(t, nil)
	e.expectError("POST", "/v1/assignments", `{"polls":[{"group":"g","cid":"c","extra":1}]}`, http.StatusBadRequest, `unknown field "extra"`)
	e.expectError("POST", "/v1/assignments", `{"polls":[`, http.StatusBadRequest, "")
	e.expectError("POST", "/v1/assignments", `{"polls":[{"group":"g","cid":"c","after":"1"}]}`, http.StatusBadRequest, "after")
	e.expectError("GET", "/v1/assignments", "", http.StatusMethodNotAllowed, "allowed: POST")
	many := `{"polls":[` + strings.Repeat(`{},`, server.MaxPollBatch) + `{}]}`
	e.expectError("POST", "/v1/assignments", many, http.StatusBadRequest, "1001 polls in one request, more than 1000")
	// The body limit (4,096 bytes in this env) holds for the batch as a whole.
	e.expectError("POST", "/v1/assignments", `{"polls":[{"group":"`+strings.Repeat("g", 5000)+`"}]}`, http.StatusRequestEntityTooLarge, "exceeds 4096 bytes")
	var got pollAnswers
	if code := e.do("POST", "/v1/assignments", `{"polls":[]}`, &got); code != http.StatusOK || got.Answers == nil || len(got.Answers) != 0 {
		t.Errorf("empty batch: %d %+v", code, got)
	}
}
