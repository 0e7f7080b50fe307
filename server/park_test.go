package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/allocd/allocd/coordinator"
	"github.com/allocd/allocd/server"
)

// rawPoll sends a long-poll on a connection of its own, as an HTTP/1.1 client does.
func rawPoll(t *testing.T, e *env, query string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", e.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET /v1/groups/g/assignment?%s HTTP/1.1\r\nHost: allocd\r\n\r\n", query)
	return conn
}

// readAnswer reads a poll's answer and checks that the connection ends with it.
func readAnswer(t *testing.T, conn net.Conn, out any) *http.Response {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("answer %q: %v", b, err)
	}
	if !resp.Close {
		t.Errorf("a parked poll's answer must close its connection (Connection: close); header %v", resp.Header)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after the answer: %v, want EOF", err)
	}
	return resp
}

// A waiting HTTP/1.1 long-poll is parked: it answers on a change, at the end of its wait, with
// the error of a member that left, and at shutdown, each with the status the handler would
// give, counted in the request metrics.
func TestParkedPolls(t *testing.T) {
	e := newEnv(t, nil)
	e.do("PUT", "/v1/topics/T", `{"brokers":[{"name":"broker-a","readQueues":4,"writeQueues":4}]}`, nil)
	e.do("PUT", "/v1/groups/g", `{"strategy":"averagely"}`, nil)
	e.do("POST", "/v1/groups/g/heartbeat", `{"cid":"c1","topics":["T"]}`, nil)
	e.do("POST", "/v1/groups/g/heartbeat", `{"cid":"c2","topics":["T"]}`, nil)
	e.tick(time.Second) // generation 1
	answered := func(code string) float64 {
		return requestCount(t, e, "GET /v1/groups/{group}/assignment", code)
	}

	// A change: both members' polls answer generation 2, and c2's poll of another topic
	// list too.
	p1 := rawPoll(t, e, "cid=c1&after=1&wait=5s")
	p2 := rawPoll(t, e, "cid=c2&after=1&wait=5s&topic=T")
	waitFor(t, func() bool { return e.s.Waiting() == 2 })
	if got := gauge(t, e, "allocd_http_parked_polls"); got != 2 {
		t.Errorf("allocd_http_parked_polls = %v with 2 polls parked", got)
	}
	e.do("POST", "/v1/groups/g/heartbeat", `{"cid":"c3","topics":["T"]}`, nil)
	e.tick(time.Second)
	for _, conn := range []net.Conn{p1, p2} {
		var a coordinator.Assignment
		if resp := readAnswer(t, conn, &a); resp.StatusCode != http.StatusOK || a.Generations["T"] != 2 || len(a.Queues["T"]) == 0 {
			t.Fatalf("woken poll: %d %+v", resp.StatusCode, a)
		}
	}
	if got := answered("200"); got != 2 {
		t.Errorf("%v parked answers counted, want 2", got)
	}

	// The end of the wait: the unchanged assignment.
	start := time.Now()
	conn := rawPoll(t, e, "cid=c1&after=2&wait=200ms")
	var a coordinator.Assignment
	if resp := readAnswer(t, conn, &a); resp.StatusCode != http.StatusOK || a.Generations["T"] != 2 || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("timed-out poll: %d %+v after %v", resp.StatusCode, a, time.Since(start))
	}

	// A member that leaves while its poll is parked gets the handler's 404.
	conn = rawPoll(t, e, "cid=c3&after=2&wait=5s")
	waitFor(t, func() bool { return e.s.Waiting() == 1 })
	e.do("POST", "/v1/groups/g/leave", `{"cid":"c3"}`, nil)
	e.tick(time.Second)
	var bad struct{ Error string }
	if resp := readAnswer(t, conn, &bad); resp.StatusCode != http.StatusNotFound || !strings.Contains(bad.Error, `member "c3"`) {
		t.Fatalf("poll of a member that left: %d %q", resp.StatusCode, bad.Error)
	}
	if got := answered("404"); got != 1 {
		t.Errorf("%v parked 404s counted, want 1", got)
	}

	// Many polls of one group, parked and answered at once, and Drain answers the rest.
	var conns []net.Conn
	for range 50 {
		conns = append(conns, rawPoll(t, e, "cid=c1&after=3&wait=5s"))
	}
	waitFor(t, func() bool { return e.s.Waiting() == 50 })
	e.s.Drain()
	if n := e.s.Waiting(); n != 0 {
		t.Fatalf("Drain returned with %d polls unanswered", n)
	}
	for _, conn := range conns {
		if resp := readAnswer(t, conn, &a); resp.StatusCode != http.StatusOK || a.Generations["T"] != 3 {
			t.Fatalf("drained poll: %d %+v", resp.StatusCode, a)
		}
	}
}

// Over HTTP/2 without TLS (h2c), which cannot be taken over, a long-poll waits in its handler
// and still answers on a change.
func TestLongPollH2C(t *testing.T) {
	e := newEnv(t, nil)
	e.do("PUT", "/v1/topics/T", `{"brokers":[{"name":"broker-a","readQueues":4,"writeQueues":4}]}`, nil)
	e.do("PUT", "/v1/groups/g", `{"strategy":"averagely"}`, nil)
	e.do("POST", "/v1/groups/g/heartbeat", `{"cid":"c1","topics":["T"]}`, nil)
	e.tick(time.Second)

	h2 := httptest.NewUnstartedServer(e.s.Handler())
	h2.Config.Protocols = new(http.Protocols)
	h2.Config.Protocols.SetUnencryptedHTTP2(true)
	h2.Start()
	defer h2.Close()
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	defer tr.CloseIdleConnections()
	done := make(chan *http.Response, 1)
	go func() {
		resp, err := (&http.Client{Transport: tr}).Get(h2.URL + "/v1/groups/g/assignment?cid=c1&after=1&wait=5s")
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	waitFor(t, func() bool { return e.s.Waiting() == 1 })
	e.do("POST", "/v1/groups/g/heartbeat", `{"cid":"c2","topics":["T"]}`, nil)
	e.tick(time.Second)
	resp := <-done
	if resp == nil {
		return
	}
	defer resp.Body.Close()
	var a coordinator.Assignment
	json.NewDecoder(resp.Body).Decode(&a)
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusOK || a.Generations["T"] != 2 {
		t.Fatalf("h2c poll: %s %d %+v", resp.Proto, resp.StatusCode, a)
	}
}

// requestCount reads allocd_http_requests_total of a route and status code.
func requestCount(t *testing.T, e *env, route, code string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "allocd_http_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["route"] == route && labels["code"] == code {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// Parked polls of one group, with waits ending at all times and generations changing under
// them, are each answered exactly once, with a complete answer.
func TestParkedPollsUnderChurn(t *testing.T) {
	e := newEnv(t, nil)
	e.do("PUT", "/v1/topics/T", `{"brokers":[{"name":"broker-a","readQueues":8,"writeQueues":8}]}`, nil)
	e.do("PUT", "/v1/groups/g", `{"strategy":"averagely"}`, nil)
	e.do("POST", "/v1/groups/g/heartbeat", `{"cid":"c1","topics":["T"]}`, nil)
	e.tick(time.Second)
	stop := make(chan struct{})
	churned := make(chan struct{})
	go func() { // a member joins and leaves, again and again
		defer close(churned)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			e.c.Heartbeat("g", coordinator.Heartbeat{CID: "c1", Topics: []string{"T"}}) // its session goes on
			if i%2 == 0 {
				e.c.Heartbeat("g", coordinator.Heartbeat{CID: "x", Topics: []string{"T"}})
			} else {
				e.c.Leave("g", "x")
			}
			e.clock.Advance(time.Second)
			e.c.Tick(t.Context())
			time.Sleep(time.Millisecond)
		}
	}()
	errs := make(chan error, 8)
	for w := range 8 {
		go func() {
			var err error
			defer func() { errs <- err }()
			for i := range 40 {
				conn, derr := net.Dial("tcp", e.ts.Listener.Addr().String())
				if derr != nil {
					err = derr
					return
				}
				fmt.Fprintf(conn, "GET /v1/groups/g/assignment?cid=c1&after=%d&wait=%dms HTTP/1.1\r\nHost: allocd\r\n\r\n", 1<<40, 1+(w*40+i)%30)
				conn.SetReadDeadline(time.Now().Add(10 * time.Second))
				resp, rerr := http.ReadResponse(bufio.NewReader(conn), nil)
				if rerr != nil {
					conn.Close()
					err = fmt.Errorf("poll %d/%d: %w", w, i, rerr)
					return
				}
				var a coordinator.Assignment
				derr = json.NewDecoder(resp.Body).Decode(&a)
				conn.Close()
				if resp.StatusCode != http.StatusOK || derr != nil || len(a.Queues["T"]) == 0 {
					err = fmt.Errorf("poll %d/%d: %d %v %+v", w, i, resp.StatusCode, derr, a)
					return
				}
			}
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	close(stop)
	<-churned
	waitFor(t, func() bool { return e.s.Waiting() == 0 })
}

// gauge reads a gauge without labels.
func gauge(t *testing.T, e *env, name string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

// seeWriter is a handler wrapper like the HA router's gate: it counts the answers it sees.
type seeWriter struct {
	http.ResponseWriter
	saw *atomic.Int64
}

func (w seeWriter) Write(b []byte) (int, error) {
	w.saw.Add(1)
	return w.ResponseWriter.Write(b)
}
func (w seeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// With NoParking, a waiting long-poll answers through the handlers wrapped around the server,
// so that the HA router can refuse an ended term's answers; with parking, it does not (the
// run that shows the check can fail).
func TestNoParkingAnswersThroughWrappers(t *testing.T) {
	for _, noParking := range []bool{true, false} {
		t.Run(fmt.Sprintf("NoParking=%v", noParking), func(t *testing.T) {
			e := newEnv(t, nil)
			s, err := server.New(server.Options{Coordinator: e.c, Plugins: plugins{}, MaxWait: 5 * time.Second, NoParking: noParking})
			if err != nil {
				t.Fatal(err)
			}
			var saw atomic.Int64
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				s.Handler().ServeHTTP(seeWriter{w, &saw}, r)
			}))
			t.Cleanup(ts.Close)
			e.do("PUT", "/v1/topics/T", `{"brokers":[{"name":"broker-a","readQueues":4,"writeQueues":4}]}`, nil)
			e.do("PUT", "/v1/groups/g", `{"strategy":"averagely"}`, nil)
			e.do("POST", "/v1/groups/g/heartbeat", `{"cid":"c1","topics":["T"]}`, nil)
			e.tick(time.Second) // generation 1
			conn, err := net.Dial("tcp", ts.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close() })
			fmt.Fprintf(conn, "GET /v1/groups/g/assignment?cid=c1&after=1&wait=5s HTTP/1.1\r\nHost: allocd\r\n\r\n")
			waitFor(t, func() bool { return s.Waiting() == 1 })
			e.do("POST", "/v1/groups/g/heartbeat", `{"cid":"c2","topics":["T"]}`, nil)
			e.tick(time.Second) // generation 2
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			var a coordinator.Assignment
			if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || !a.Newer(1) {
				t.Fatalf("answer: %+v, %v; want generation 2", a, err)
			}
			if got := saw.Load() > 0; got != noParking {
				t.Errorf("the wrapper saw the answer: %v, want %v", got, noParking)
			}
		})
	}
}
