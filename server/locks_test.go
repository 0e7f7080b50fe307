package server_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// lockEnv has topic T (broker-a, 4 queues), orderly groups q (queue delivery) and m (message
// delivery), a plain group p, and members c1 and c2 in q and m, with q's generation published.
func lockEnv(t *testing.T) *env {
	e := newEnv(t, nil)
	e.do("PUT", "/v1/topics/T", `{"brokers":[{"name":"broker-a","readQueues":4,"writeQueues":4}]}`, nil)
	for name, body := range map[string]string{
		"q": `{"strategy":"averagely","orderly":true}`,
		"m": `{"delivery":"message","orderly":true}`,
		"p": `{"strategy":"averagely"}`,
	} {
		if code := e.do("PUT", "/v1/groups/"+name, body, nil); code != http.StatusCreated {
			t.Fatalf("PUT group %s: %d", name, code)
		}
	}
	for _, g := range []string{"q", "m", "p"} {
		for _, cid := range []string{"c1", "c2"} {
			if code := e.do("POST", "/v1/groups/"+g+"/heartbeat", `{"cid":"`+cid+`","topics":["T"]}`, nil); code != http.StatusOK {
				t.Fatalf("heartbeat: %d", code)
			}
		}
	}
	e.tick(time.Second)
	return e
}

func queueBody(cid string, ids ...string) string {
	var qs []string
	for _, id := range ids {
		qs = append(qs, `{"topic":"T","brokerName":"broker-a","queueId":`+id+`}`)
	}
	return `{"cid":"` + cid + `","queues":[` + strings.Join(qs, ",") + `],"lease":"30s"}`
}

func TestQueueLockRoutes(t *testing.T) {
	e := lockEnv(t)
	// averagely: c1 has queues 0 and 1, c2 has 2 and 3.
	var got struct {
		Locked []struct {
			Queue struct {
				Topic, BrokerName string
				QueueID           int32
			}
			Token   uint64
			Expires string
			Renewed bool
		}
		Refused []struct {
			Queue                 struct{ QueueID int32 }
			Holder, Reason, Owner string
			RetryAfter            string
		}
	}
	if code := e.do("POST", "/v1/groups/q/locks/queues", queueBody("c1", "0", "1", "2"), &got); code != http.StatusOK {
		t.Fatalf("lock: %d", code)
	}
	if len(got.Locked) != 2 || got.Locked[0].Queue.QueueID != 0 || got.Locked[0].Token == 0 || got.Locked[0].Queue.BrokerName != "broker-a" {
		t.Fatalf("locked: %+v", got.Locked)
	}
	exp, err := time.Parse(time.RFC3339, got.Locked[0].Expires)
	if err != nil || !exp.Equal(e.clock.Now().Add(30*time.Second)) {
		t.Fatalf("expires %q (%v), want the clock plus the 30s lease", got.Locked[0].Expires, err)
	}
	if len(got.Refused) != 1 || got.Refused[0].Queue.QueueID != 2 || got.Refused[0].Reason != "not-owner" || got.Refused[0].Owner != "c2" || got.Refused[0].Holder != "" {
		t.Fatalf("refused: %+v", got.Refused)
	}
	token := got.Locked[0].Token

	// Renewal keeps the token.
	e.do("POST", "/v1/groups/q/locks/queues", queueBody("c1", "0"), &got)
	if len(got.Locked) != 1 || got.Locked[0].Token != token || !got.Locked[0].Renewed {
		t.Fatalf("renewal: %+v", got.Locked)
	}
	var check struct {
		Valid  bool
		Holder string
	}
	e.do("POST", "/v1/groups/q/locks/check", `{"topic":"T","queue":{"topic":"T","brokerName":"broker-a","queueId":0},"token":`+itoa(token)+`}`, &check)
	if !check.Valid {
		t.Fatal("the holder's token does not check")
	}
	var unlocked struct{ Unlocked []struct{ QueueID int32 } }
	if code := e.do("POST", "/v1/groups/q/unlock/queues", `{"cid":"c1","queues":[{"topic":"T","brokerName":"broker-a","queueId":0},{"topic":"T","brokerName":"broker-a","queueId":3}]}`, &unlocked); code != http.StatusOK || len(unlocked.Unlocked) != 1 {
		t.Fatalf("unlock: %d %+v", code, unlocked)
	}
	e.do("POST", "/v1/groups/q/locks/check", `{"queue":{"topic":"T","brokerName":"broker-a","queueId":0},"token":`+itoa(token)+`}`, &check)
	if check.Valid {
		t.Fatal("a token checks after its unlock")
	}
	var leases struct{ Locks []struct{ Holder string } }
	if e.do("GET", "/v1/groups/q/locks", "", &leases); len(leases.Locks) != 1 || leases.Locks[0].Holder != "c1" {
		t.Fatalf("leases: %+v", leases)
	}
}

func TestMessageGroupLockRoutes(t *testing.T) {
	e := lockEnv(t)
	const body = `{"cid":"%s","topic":"T","messageGroup":"order-42"}`
	var granted struct {
		Granted    bool
		Token      uint64
		Attempt    int
		Expires    string
		DeadLetter bool
	}
	if code := e.do("POST", "/v1/groups/m/locks/message-groups", strings.Replace(body, "%s", "c1", 1), &granted); code != http.StatusOK ||
		!granted.Granted || granted.Token == 0 || granted.Attempt != 1 || granted.Expires == "" {
		t.Fatalf("grant: %d %+v", code, granted)
	}
	var refused struct {
		Granted    bool
		Holder     string
		Reason     string
		RetryAfter string
	}
	e.do("POST", "/v1/groups/m/locks/message-groups", strings.Replace(body, "%s", "c2", 1), &refused)
	if d, err := time.ParseDuration(refused.RetryAfter); refused.Granted || refused.Holder != "c1" || refused.Reason != "held" || err != nil || d <= 0 {
		t.Fatalf("refusal: %+v", refused)
	}
	release := func(cid string, token uint64, outcome string) string {
		return `{"cid":"` + cid + `","topic":"T","messageGroup":"order-42","token":` + itoa(token) + `,"outcome":"` + outcome + `"}`
	}
	e.expectError("POST", "/v1/groups/m/release/message-groups", release("c1", granted.Token+1, "retry"), http.StatusConflict, "stale")
	e.expectError("POST", "/v1/groups/m/release/message-groups", release("c2", granted.Token, "retry"), http.StatusConflict, "held by c1, not c2")
	var released struct{ Released bool }
	if code := e.do("POST", "/v1/groups/m/release/message-groups", release("c1", granted.Token, "retry"), &released); code != http.StatusOK || !released.Released {
		t.Fatalf("release: %d %+v", code, released)
	}
	old := granted.Token
	e.do("POST", "/v1/groups/m/locks/message-groups", strings.Replace(body, "%s", "c2", 1), &granted)
	if !granted.Granted || granted.Attempt != 2 || granted.Token <= old {
		t.Fatalf("c2 after a retry: %+v", granted)
	}
	var check struct {
		Valid  bool
		Holder string
	}
	e.do("POST", "/v1/groups/m/locks/check", `{"topic":"T","messageGroup":"order-42","token":`+itoa(old)+`}`, &check)
	if check.Valid || check.Holder != "c2" {
		t.Fatalf("check of the old token: %+v", check)
	}
	check.Valid, check.Holder = false, ""
	e.do("POST", "/v1/groups/m/locks/check", `{"topic":"T","messageGroup":"order-42","token":`+itoa(granted.Token)+`}`, &check)
	if !check.Valid {
		t.Fatalf("check of the live token: %+v", check)
	}
	// c2 leaves: its group is free at once.
	if code := e.do("POST", "/v1/groups/m/leave", `{"cid":"c2"}`, nil); code != http.StatusOK {
		t.Fatalf("leave: %d", code)
	}
	check.Valid, check.Holder = false, ""
	e.do("POST", "/v1/groups/m/locks/check", `{"topic":"T","messageGroup":"order-42","token":`+itoa(granted.Token)+`}`, &check)
	if check.Valid || check.Holder != "" {
		t.Fatalf("check after the holder left: %+v", check)
	}
}

func TestLockRouteErrors(t *testing.T) {
	e := lockEnv(t)
	mg := func(fields string) string { return `{"cid":"c1","topic":"T","messageGroup":"g1"` + fields + `}` }
	for _, c := range []struct {
		path, body string
		status     int
		want       string
	}{
		{"q/locks/queues", `{"cid":"c1","queues":[]}`, 400, "queues is empty"},
		{"q/locks/queues", `{"cid":"c1","queues":[{"topic":"T","brokerName":"broker-a","queueId":-1}]}`, 400, "negative"},
		{"q/locks/queues", `{"cid":"c1","queues":[{"topic":"T","brokerName":"broker-a","queueId":0}],"lease":"1s"}`, 400, "lease 1s out of range [10s, 12h0m0s]"},
		{"q/locks/queues", `{"cid":"c1","queues":[{"topic":"T","brokerName":"broker-a","queueId":0}],"lease":"soon"}`, 400, `lease "soon"`},
		{"q/locks/queues", `{"cid":"c1","queues":[],"extra":1}`, 400, `unknown field "extra"`},
		{"q/locks/queues", `{"cid":"","queues":[]}`, 400, "cid is empty"},
		{"nope/locks/queues", queueBody("c1", "0"), 404, `group "nope" not found`},
		{"q/locks/queues", queueBody("c9", "0"), 404, `"c9" is not a live member`},
		{"p/locks/queues", queueBody("c1", "0"), 409, "not an orderly group"},
		{"q/locks/message-groups", mg(""), 409, "takes queue locks, not message-group locks"},
		{"m/locks/queues", queueBody("c1", "0"), 409, "takes message-group locks, not queue locks"},
		{"m/locks/message-groups", `{"cid":"c1","topic":"T","messageGroup":"` + strings.Repeat("x", 65) + `"}`, 400, "more than 64"},
		{"m/locks/message-groups", `{"cid":"c1","topic":"T","messageGroup":""}`, 400, "messageGroup is empty"},
		{"m/release/message-groups", mg(`,"outcome":"done"`), 400, "token is required"},
		{"m/release/message-groups", mg(`,"token":3,"outcome":"ok"`), 400, `outcome "ok"`},
		{"m/locks/check", `{"topic":"T","token":3}`, 400, "give the lock to check"},
		{"m/locks/check", `{"topic":"T","messageGroup":"g","queue":{"topic":"T","brokerName":"b","queueId":0},"token":3}`, 400, "not both"},
		{"m/locks/check", `{"topic":"U","queue":{"topic":"T","brokerName":"b","queueId":0},"token":3}`, 400, "differs"},
	} {
		e.expectError("POST", "/v1/groups/"+c.path, c.body, c.status, c.want)
	}
	e.expectError("GET", "/v1/groups/q/locks/queues", "", http.StatusMethodNotAllowed, "allowed: POST")
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
