package server

import (
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/allocd/allocd/coordinator"
)

// MaxPollBatch is the most long-polls one POST /v1/assignments may carry.
const MaxPollBatch = 1000

// A poll batch holds the assignment long-polls of several members, of one group or of several,
// in one request: POST /v1/assignments with {"polls":[{"group":G,"cid":C,"topics":[T,...],
// "after":N,"wait":"30s"},...]}, each poll what GET /v1/groups/G/assignment?cid=C&topic=T&
// after=N&wait=30s asks (topics and after may be left out, as those query parameters may; wait
// defaults to the daemon's --default-wait when after is given, and is capped at --max-wait).
// The request is answered as soon as one of its polls would be answered alone (its generation
// is newer than after, it fails, or its own wait has ended), or when the daemon drains. The
// answers are in the polls' places of {"answers":[...]}: {"status":200,"answer":A} for each
// poll answered, A what it would have answered alone, {"status":S,"error":E} for one that
// failed, and {"status":304} for one still waiting, which the client sends again. Over HTTP/2
// a held long-poll is a net/http stream, a goroutine and buffers of about 20 KiB of RSS each
// that no setting of ours reduces; a process running many members (the Go client batches the
// polls of its consumers) so holds one stream for many (BENCHMARKS.md, "Polls that share a
// request").
type pollBatch struct {
	Polls []batchedPoll `json:"polls"`
}

type batchedPoll struct {
	Group  string   `json:"group"`
	CID    string   `json:"cid"`
	Topics []string `json:"topics"`
	After  *int64   `json:"after"`
	Wait   string   `json:"wait"`
}

// heldPoll is one poll of a batch while the batch is held.
type heldPoll struct {
	group    string
	q        pollQuery
	deadline time.Time
	err      error // its request was not valid, or Poll failed: answered
	a        coordinator.Assignment
	answered bool
}

func newPollBatchMetric() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "allocd_http_batched_polls_total",
		Help: "Long-polls answered within POST /v1/assignments, by status code: 200 and errors as each would have had alone, 304 for one still waiting when another of its batch was answered.",
	}, []string{"code"})
}

// check reads one poll of a batch as parsePoll reads a long-poll's query.
func (p batchedPoll) check(defaultWait, maxWait time.Duration) (pollQuery, error) {
	q := pollQuery{cid: p.CID, after: -1}
	if err := coordinator.CheckName("group", p.Group); err != nil {
		return q, err
	}
	if err := coordinator.CheckID("cid", p.CID); err != nil {
		return q, err
	}
	for _, t := range p.Topics {
		if err := coordinator.CheckName("topic", t); err != nil {
			return q, err
		}
	}
	q.topics = p.Topics // nil: the member's own
	if p.After != nil {
		if *p.After < 0 {
			return q, badRequest("after=%d is not a generation number (an integer >= 0)", *p.After)
		}
		q.after = *p.After
	}
	var err error
	q.wait, err = pollWait(p.After != nil, p.Wait != "", p.Wait, defaultWait, maxWait)
	return q, err
}

// decodePollBatch reads a poll batch's body: an error for the request as a whole, or each poll
// checked, a poll that is not valid holding its error (its answer), the others their deadline.
func decodePollBatch(body []byte, start time.Time, defaultWait, maxWait time.Duration) ([]heldPoll, error) {
	var req pollBatch
	if err := decodeBody(body, &req); err != nil {
		return nil, err
	}
	if len(req.Polls) > MaxPollBatch {
		return nil, badRequest("%d polls in one request, more than %d", len(req.Polls), MaxPollBatch)
	}
	polls := make([]heldPoll, len(req.Polls))
	for i, p := range req.Polls {
		polls[i].group = p.Group
		polls[i].q, polls[i].err = p.check(defaultWait, maxWait)
		polls[i].deadline = start.Add(polls[i].q.wait)
	}
	return polls, nil
}

func (s *Server) assignments(w http.ResponseWriter, r *http.Request) error {
	start := time.Now()
	body, err := readBody(r.Body)
	if err != nil {
		return err
	}
	polls, err := decodePollBatch(body, start, s.opts.DefaultWait, s.opts.MaxWait)
	if err != nil {
		return err
	}
	final := s.draining()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	var cases []reflect.SelectCase
	var chans []<-chan struct{} // the groups' change channels in cases, each once
	for {
		now := time.Now()
		ready := false
		cases, chans = cases[:0], chans[:0]
		next := time.Time{} // the earliest deadline of a poll left waiting
		for i := range polls {
			p := &polls[i]
			if p.err != nil {
				ready = true
				continue
			}
			a, changed, err := s.c.Poll(p.group, p.q.cid, p.q.topics)
			switch {
			case err != nil:
				p.err, ready = err, true
			case final || a.Newer(p.q.after) || !now.Before(p.deadline):
				p.a, p.answered, ready = a, true, true
			default:
				if next.IsZero() || p.deadline.Before(next) {
					next = p.deadline
				}
				if !slices.Contains(chans, changed) {
					chans = append(chans, changed)
					cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(changed)})
				}
			}
		}
		if ready || len(polls) == 0 {
			return s.answerPolls(w, polls)
		}
		if timer == nil {
			timer = time.NewTimer(next.Sub(now))
		} else {
			timer.Reset(next.Sub(now)) // Go 1.23 timers: no stale fire to drain
		}
		changes := len(cases)
		cases = append(cases,
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)},
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf((<-chan struct{})(s.drain))},
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(s.c.Done())},
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(r.Context().Done())})
		held := int64(len(polls)) // every poll waits, or the batch would have answered
		s.waiting.Add(held)
		chosen, _, _ := reflect.Select(cases)
		s.waiting.Add(-held)
		switch chosen - changes {
		case 0: // a deadline: the next round answers that poll
		case 1, 2:
			final = true
		case 3:
			return nil // the client went away
		}
	}
}

// answerPolls writes a batch's answers: each poll answered or failed in its place, 304 for the
// others.
func (s *Server) answerPolls(w http.ResponseWriter, polls []heldPoll) error {
	b := make([]byte, 0, 64+200*len(polls))
	b = append(b, `{"answers":[`...)
	for i := range polls {
		p := &polls[i]
		if i > 0 {
			b = append(b, ',')
		}
		status := http.StatusNotModified
		if p.err != nil || p.answered {
			var err error
			if b, status, err = s.appendItem(b, p.a, p.err, "long-poll", p.group); err != nil {
				return err
			}
		} else {
			b = append(b, `{"status":304}`...)
		}
		s.batchedPolls.WithLabelValues(strconv.Itoa(status)).Inc()
	}
	b = append(b, "]}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, err := w.Write(b)
	return err
}
