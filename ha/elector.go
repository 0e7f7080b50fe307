package ha

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// MinTTL is the shortest session TTL: etcd grants no lease shorter than 1.5 election timeouts,
// 2 s with its defaults, whatever is asked.
const MinTTL = 2 * time.Second

// Term is one won election: the election key and its creation revision, which every write of
// the term is fenced by, and which grows with every term across the cluster.
type Term struct {
	Key string
	Rev int64
}

// Config sets up an Elector.
type Config struct {
	// Client reaches etcd (required).
	Client *clientv3.Client
	// Prefix is the election's key prefix, such as "/allocd/leader" (required).
	Prefix string
	// Value is what the leader publishes under its key: its advertised URL (required).
	Value string
	// TTL is the session lease's TTL, at least MinTTL, rounded up to whole seconds (etcd's
	// unit).
	TTL time.Duration
	// Margin keeps the local deadline this far below the lease's end (DefaultMargin(TTL)).
	Margin time.Duration
	// Lead runs for each term, from the win to the step-down: it serves until ctx ends, then
	// lets go of everything it holds and returns. An error it returns ends the term.
	Lead func(ctx context.Context, t Term) error
	// Clock is SystemClock by default.
	Clock Clock
	// Logger receives elections and step-downs.
	Logger zerolog.Logger
	// Metrics, if set, receives the role, elections won, step-downs and time without a leader.
	Metrics prometheus.Registerer
	// RetryEvery is the pause after a failed campaign or lost session before the next (1 s).
	RetryEvery time.Duration
}

// Role is a replica's part in the election.
type Role string

// The roles.
const (
	RoleLeader    Role = "leader"
	RoleFollower  Role = "follower"
	RoleCandidate Role = "no leader" // campaigning, and no replica is known to lead
)

// Elector campaigns for leadership again and again, runs Config.Lead while it leads, and
// watches who leads when it does not.
type Elector struct {
	cfg      Config
	ttlSecs  int64
	deadline *Deadline

	mu       sync.Mutex
	term     *Term  // nil unless leading
	leader   string // the leader's value as last seen; "" when none
	noLeader time.Time
	lostSum  time.Duration // time without a known leader, before noLeader
	lost     chan error    // the current term's step-down signal

	won       prometheus.Counter
	stepDowns *prometheus.CounterVec
}

// New checks cfg and returns an Elector; Run starts it.
func New(cfg Config) (*Elector, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("ha: Config.Client is required")
	case cfg.Prefix == "":
		return nil, errors.New("ha: Config.Prefix is required")
	case cfg.Value == "":
		return nil, errors.New("ha: Config.Value (the advertised URL) is required")
	case cfg.Lead == nil:
		return nil, errors.New("ha: Config.Lead is required")
	case cfg.TTL < MinTTL:
		return nil, fmt.Errorf("ha: session TTL %v is below etcd's minimum of %v", cfg.TTL, MinTTL)
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	if cfg.Margin <= 0 {
		cfg.Margin = DefaultMargin(cfg.TTL)
	}
	if cfg.Margin >= cfg.TTL/2 {
		return nil, fmt.Errorf("ha: margin %v must be under half the TTL %v", cfg.Margin, cfg.TTL)
	}
	if cfg.RetryEvery <= 0 {
		cfg.RetryEvery = time.Second
	}
	e := &Elector{
		cfg: cfg, ttlSecs: int64(math.Ceil(cfg.TTL.Seconds())), deadline: NewDeadline(cfg.Margin),
		noLeader: cfg.Clock.Now(),
		won: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "allocd_ha_elections_won_total", Help: "Elections this replica won.",
		}),
		stepDowns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "allocd_ha_step_downs_total", Help: "Times this replica stopped leading, by reason (session, deadline, fenced, error, shutdown).",
		}, []string{"reason"}),
	}
	if cfg.Metrics != nil {
		for _, c := range []prometheus.Collector{e.won, e.stepDowns, roleCollector{e}} {
			if err := cfg.Metrics.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return e, nil
}

// Leading reports whether this replica leads and its deadline has not passed: whether it may
// answer from its memory now.
func (e *Elector) Leading() bool {
	e.mu.Lock()
	leading := e.term != nil
	e.mu.Unlock()
	return leading && e.deadline.Valid(e.cfg.Clock.Now())
}

// Leader returns the role of this replica and the value (advertised URL) of the leader, "" when
// no replica is known to lead.
func (e *Elector) Leader() (Role, string) {
	if e.Leading() {
		return RoleLeader, e.cfg.Value
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.leader == "" || e.leader == e.cfg.Value {
		// Our own key while not leading: a term ending, or a deadline passed.
		return RoleCandidate, ""
	}
	return RoleFollower, e.leader
}

// Self is this replica's value.
func (e *Elector) Self() string { return e.cfg.Value }

// Fenced ends the current term at once: a write of it was refused by etcd's fence, so another
// replica leads or the lease is gone. Safe to call from any goroutine, any number of times.
func (e *Elector) Fenced(err error) { e.stepDown("fenced", err) }

func (e *Elector) stepDown(reason string, err error) {
	e.mu.Lock()
	lost := e.lost
	e.mu.Unlock()
	if lost == nil {
		return
	}
	select {
	case lost <- fmt.Errorf("%s: %w", reason, err):
	default: // already signalled
	}
}

// withoutLeader is the total time this replica knew of no leader.
func (e *Elector) withoutLeader() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	d := e.lostSum
	if !e.noLeader.IsZero() {
		d += e.cfg.Clock.Now().Sub(e.noLeader)
	}
	return d
}

// setLeader records the leader seen in etcd.
func (e *Elector) setLeader(v string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if v == e.leader {
		return
	}
	now := e.cfg.Clock.Now()
	switch {
	case v == "" && e.noLeader.IsZero():
		e.noLeader = now
	case v != "" && !e.noLeader.IsZero():
		e.lostSum += now.Sub(e.noLeader)
		e.noLeader = time.Time{}
	}
	e.leader = v
}

// Run campaigns until ctx ends. On shutdown a leader gives its lease back, so another replica
// takes over at once instead of after the TTL.
func (e *Elector) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { e.watchLeader(ctx) })
	defer wg.Wait()
	for ctx.Err() == nil {
		err := e.session(ctx)
		if ctx.Err() != nil {
			break
		}
		e.cfg.Logger.Warn().Err(err).Dur("retryIn", e.cfg.RetryEvery).Msg("election: session ended")
		select {
		case <-ctx.Done():
		case <-time.After(e.cfg.RetryEvery):
		}
	}
	return nil
}

// session runs one etcd session: a lease kept alive, a campaign, and the term if it wins.
func (e *Elector) session(ctx context.Context) error {
	cli := e.cfg.Client
	sent := e.cfg.Clock.Now()
	grant, err := cli.Grant(ctx, e.ttlSecs)
	if err != nil {
		return fmt.Errorf("granting a session lease: %w", err)
	}
	e.deadline.Clear()
	e.deadline.Renewed(sent, time.Duration(grant.TTL)*time.Second)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := concurrency.NewSession(cli, concurrency.WithLease(grant.ID), concurrency.WithTTL(int(grant.TTL)), concurrency.WithContext(sctx))
	if err != nil {
		e.revoke(grant.ID)
		return fmt.Errorf("starting a session: %w", err)
	}
	defer func() {
		cancel()
		s.Orphan()
		e.revoke(grant.ID)
		e.deadline.Clear()
	}()
	// Our own keep-alives, besides the session's, so the deadline is measured from a send time.
	kaErr := make(chan error, 1)
	go func() { kaErr <- e.keepAlive(sctx, grant.ID, time.Duration(grant.TTL)*time.Second) }()

	el := concurrency.NewElection(s, e.cfg.Prefix)
	cctx, ccancel := context.WithCancel(sctx)
	go func() {
		select {
		case <-s.Done():
		case <-cctx.Done():
		}
		ccancel()
	}()
	err = el.Campaign(cctx, e.cfg.Value)
	ccancel()
	if err != nil {
		return fmt.Errorf("campaign: %w", err)
	}
	select {
	case <-s.Done():
		return errors.New("campaign won after the session ended")
	case err := <-kaErr:
		return err
	default:
	}
	if !e.deadline.Valid(e.cfg.Clock.Now()) {
		return errors.New("campaign won after the local deadline passed")
	}
	return e.lead(sctx, s, Term{Key: el.Key(), Rev: el.Rev()}, kaErr)
}

// lead runs one term until it ends.
func (e *Elector) lead(ctx context.Context, s *concurrency.Session, t Term, kaErr <-chan error) error {
	lost := make(chan error, 1)
	e.mu.Lock()
	e.term, e.lost = &t, lost
	e.mu.Unlock()
	e.setLeader(e.cfg.Value)
	e.won.Inc()
	e.cfg.Logger.Info().Str("key", t.Key).Int64("rev", t.Rev).Time("deadline", e.deadline.Until()).Msg("elected leader")

	tctx, cancel := context.WithCancel(ctx)
	leadErr := make(chan error, 1)
	go func() { leadErr <- e.cfg.Lead(tctx, t) }()

	var reason string
	var err error
	timer := time.NewTimer(e.untilDeadline())
	defer timer.Stop()
	for reason == "" {
		select {
		case <-ctx.Done():
			reason, err = "shutdown", ctx.Err()
		case <-s.Done():
			reason, err = "session", errors.New("the session's lease is gone")
		case err = <-kaErr:
			reason = "session"
		case err = <-lost:
			reason = "fenced"
		case err = <-leadErr:
			reason = "error"
			leadErr = nil
		case <-timer.C:
			if !e.deadline.Valid(e.cfg.Clock.Now()) {
				reason, err = "deadline", fmt.Errorf("no keep-alive answered before %v", e.deadline.Until().Format(time.RFC3339Nano))
				break
			}
			timer.Reset(e.untilDeadline())
		}
	}
	// Stop answering first (Leading turns false), then let the term's work wind down.
	e.mu.Lock()
	e.term, e.lost = nil, nil
	e.mu.Unlock()
	e.setLeader("")
	cancel()
	if leadErr != nil {
		<-leadErr
	}
	e.stepDowns.WithLabelValues(reason).Inc()
	ev := e.cfg.Logger.Warn()
	if reason == "shutdown" {
		ev = e.cfg.Logger.Info()
	}
	ev.Str("reason", reason).AnErr("cause", err).Int64("rev", t.Rev).Msg("stepped down")
	return fmt.Errorf("term %d ended (%s): %w", t.Rev, reason, err)
}

func (e *Elector) untilDeadline() time.Duration {
	return max(e.deadline.Until().Sub(e.cfg.Clock.Now()), time.Millisecond)
}

// keepAlive renews the lease every third of its TTL and moves the deadline with each answer.
// It returns when the lease is gone or ctx ends; a failed keep-alive is retried until then.
func (e *Elector) keepAlive(ctx context.Context, id clientv3.LeaseID, ttl time.Duration) error {
	every := ttl / 3
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
		sent := e.cfg.Clock.Now()
		rctx, cancel := context.WithTimeout(ctx, every)
		resp, err := e.cfg.Client.KeepAliveOnce(rctx, id)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err == nil && resp.TTL > 0:
			e.deadline.Renewed(sent, time.Duration(resp.TTL)*time.Second)
		case err == nil:
			return errors.New("the session's lease expired")
		case isLeaseGone(err):
			return fmt.Errorf("the session's lease expired: %w", err)
		default:
			e.cfg.Logger.Debug().Err(err).Msg("keep-alive failed; retrying")
		}
	}
}

func isLeaseGone(err error) bool {
	return errors.Is(err, rpctypes.ErrLeaseNotFound) || errors.Is(err, rpctypes.ErrGRPCLeaseNotFound)
}

// revoke gives the lease back, deleting the election key with it, so the next candidate need
// not wait out the TTL. When etcd cannot be reached the lease expires by itself.
func (e *Elector) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := e.cfg.Client.Revoke(ctx, id); err != nil && !isLeaseGone(err) {
		e.cfg.Logger.Debug().Err(err).Msg("revoking the session lease; it will expire")
	}
}

// watchLeader keeps e.leader up to date with the election's first key, until ctx ends.
func (e *Elector) watchLeader(ctx context.Context) {
	cli := e.cfg.Client
	pfx := e.cfg.Prefix + "/"
	for ctx.Err() == nil {
		resp, err := cli.Get(ctx, pfx, clientv3.WithFirstCreate()...)
		if err != nil {
			e.setLeader("")
			select {
			case <-ctx.Done():
			case <-time.After(e.cfg.RetryEvery):
			}
			continue
		}
		if len(resp.Kvs) == 0 {
			e.setLeader("")
		} else {
			e.setLeader(string(resp.Kvs[0].Value))
		}
		wctx, cancel := context.WithCancel(ctx)
		wch := cli.Watch(clientv3.WithRequireLeader(wctx), pfx, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
		for wr := range wch {
			if wr.Err() != nil {
				break
			}
			if len(wr.Events) > 0 {
				break // read the first key again
			}
		}
		cancel()
	}
}

// roleCollector reports the role and the time without a leader at scrape time.
type roleCollector struct{ e *Elector }

var (
	roleDesc = prometheus.NewDesc("allocd_ha_role", "1 for this replica's role in the election (leader, follower, none).", []string{"role"}, nil)
	lostDesc = prometheus.NewDesc("allocd_ha_without_leader_seconds_total", "Time this replica knew of no leader (electing, or etcd unreachable).", nil, nil)
)

func (roleCollector) Describe(ch chan<- *prometheus.Desc) { ch <- roleDesc; ch <- lostDesc }

func (c roleCollector) Collect(ch chan<- prometheus.Metric) {
	role, _ := c.e.Leader()
	for _, r := range []struct {
		label string
		role  Role
	}{{"leader", RoleLeader}, {"follower", RoleFollower}, {"none", RoleCandidate}} {
		v := 0.0
		if role == r.role {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(roleDesc, prometheus.GaugeValue, v, r.label)
	}
	ch <- prometheus.MustNewConstMetric(lostDesc, prometheus.CounterValue, c.e.withoutLeader().Seconds())
}
