package autoscale

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Policy is a topic's auto-scaling configuration. The zero value is not usable: start from
// DefaultPolicy and change what differs, then let New or Topic.SetPolicy validate it.
//
//	p := autoscale.DefaultPolicy()
//	p.Enabled, p.Max = true, 64
//
// A Policy is a plain value: copying it copies everything.
type Policy struct {
	// Enabled turns scaling on. Default false: a topic's queue counts are the operator's until
	// the operator hands them over. A disabled topic still records membership and offsets, so
	// enabling it later acts on current facts.
	Enabled bool

	// Min and Max bound the target queue count per broker. Defaults 1 and 1024. Unlike
	// DeFiBus, whose read count stops at 1023, Max is inclusive.
	Min, Max int

	// ExpandWriteDelay is how long after the read count rises the write count may follow, so
	// consumers attach to new queues before producers write to them. Default 10 s.
	ExpandWriteDelay time.Duration

	// MaxConfirmWait bounds, from the same start as ExpandWriteDelay, how long the write step
	// of an expansion waits for every member of the sizing groups to confirm the new queues.
	// Past it the step proceeds and says so in an EventUnconfirmed. Default 60 s. It may not be
	// shorter than ExpandWriteDelay; set them equal to not wait for confirmations at all.
	MaxConfirmWait time.Duration

	// ShrinkReadDelay is how long after the write count drops the read count may follow, and
	// how often a read drop blocked by undrained queues is checked again. Default 5 min.
	ShrinkReadDelay time.Duration

	// ShrinkStableFor is how long the target must stay below the current count before a shrink
	// starts, so a rolling restart does not shrink and regrow the topic. Default 60 s.
	ShrinkStableFor time.Duration

	// DrainQuietFor is how long a queue must have gone without a write before it may be
	// removed. Default 60 s, DeFiBus's hard-coded value.
	DrainQuietFor time.Duration

	// OffsetRetention is how long a group that is no longer live (or not clustering) still
	// blocks a read drop through the offsets it committed: it counts for a queue while its
	// committed offset there last advanced within OffsetRetention. Default 72 h, RocketMQ's
	// default message retention (fileReservedTime): past it the messages such a group has not
	// read are being deleted by the broker anyway, so waiting longer protects nothing, while
	// counting it forever is DeFiBus's fault A.11.3 (stale groups block shrinking for good).
	OffsetRetention time.Duration
}

// DefaultPolicy returns the defaults named on each Policy field. Enabled is false.
func DefaultPolicy() Policy {
	return Policy{
		Min:              1,
		Max:              1024,
		ExpandWriteDelay: 10 * time.Second,
		MaxConfirmWait:   60 * time.Second,
		ShrinkReadDelay:  5 * time.Minute,
		ShrinkStableFor:  60 * time.Second,
		DrainQuietFor:    60 * time.Second,
		OffsetRetention:  72 * time.Hour,
	}
}

// MaxQueues is the largest queue count per broker this package handles, and so the largest
// Max a policy may set. DeFiBus stops at 1023. The bound keeps every loop over a broker's
// queues (a drain check, the daemon's queue list for an assignment) bounded whatever a
// request or a persisted state says; 65536 is far above any real topic and well inside the
// int32 queue ids of the wire format (abi.Queue).
const MaxQueues = 1 << 16

// Validate reports every value of p that is out of range, joined into one error.
func (p Policy) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("autoscale: policy "+format, args...))
	}
	if p.Min < 1 {
		bad("min %d out of range: must be at least 1", p.Min)
	}
	if p.Max > MaxQueues {
		bad("max %d out of range: must be at most %d", p.Max, MaxQueues)
	}
	if p.Max < p.Min {
		bad("max %d below min %d", p.Max, p.Min)
	}
	nonNegative := func(name string, d time.Duration) {
		if d < 0 {
			bad("%s %s is negative", name, formatDuration(d))
		}
	}
	nonNegative("expandWriteDelay", p.ExpandWriteDelay)
	nonNegative("maxConfirmWait", p.MaxConfirmWait)
	nonNegative("shrinkStableFor", p.ShrinkStableFor)
	nonNegative("drainQuietFor", p.DrainQuietFor)
	nonNegative("offsetRetention", p.OffsetRetention)
	if p.MaxConfirmWait < p.ExpandWriteDelay && p.MaxConfirmWait >= 0 {
		bad("maxConfirmWait %s shorter than expandWriteDelay %s: set them equal to not wait for confirmations",
			formatDuration(p.MaxConfirmWait), formatDuration(p.ExpandWriteDelay))
	}
	// A zero recheck interval would make a blocked read drop due again at the very instant it
	// was checked: the daemon's timer would spin.
	if p.ShrinkReadDelay <= 0 {
		bad("shrinkReadDelay %s must be positive: it is also the interval between drain checks",
			formatDuration(p.ShrinkReadDelay))
	}
	return errors.Join(errs...)
}

// policyJSON is Policy's wire form, the one `PUT /v1/topics/{topic}` takes under "autoscale":
// durations are Go duration strings ("10s", "5m"). Pointers tell a missing field from a zero.
type policyJSON struct {
	Enabled          *bool   `json:"enabled,omitempty"`
	Min              *int    `json:"min,omitempty"`
	Max              *int    `json:"max,omitempty"`
	ExpandWriteDelay *string `json:"expandWriteDelay,omitempty"`
	MaxConfirmWait   *string `json:"maxConfirmWait,omitempty"`
	ShrinkReadDelay  *string `json:"shrinkReadDelay,omitempty"`
	ShrinkStableFor  *string `json:"shrinkStableFor,omitempty"`
	DrainQuietFor    *string `json:"drainQuietFor,omitempty"`
	OffsetRetention  *string `json:"offsetRetention,omitempty"`
}

// MarshalJSON writes p with durations as strings, e.g. {"enabled":true,"min":1,"max":64,
// "expandWriteDelay":"10s",...}.
func (p Policy) MarshalJSON() ([]byte, error) {
	str := func(d time.Duration) *string { s := formatDuration(d); return &s }
	return json.Marshal(policyJSON{
		Enabled:          &p.Enabled,
		Min:              &p.Min,
		Max:              &p.Max,
		ExpandWriteDelay: str(p.ExpandWriteDelay),
		MaxConfirmWait:   str(p.MaxConfirmWait),
		ShrinkReadDelay:  str(p.ShrinkReadDelay),
		ShrinkStableFor:  str(p.ShrinkStableFor),
		DrainQuietFor:    str(p.DrainQuietFor),
		OffsetRetention:  str(p.OffsetRetention),
	})
}

// UnmarshalJSON sets the fields present in data and leaves the others as they are, so
// decoding into DefaultPolicy() yields the defaults for every field the document omits.
// Unknown fields are an error: a misspelt "shrinkReadDelay" must not silently mean 5 min.
// It does not validate; New and SetPolicy do.
func (p *Policy) UnmarshalJSON(data []byte) error {
	var w policyJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return fmt.Errorf("autoscale: policy: %w", err)
	}
	q := *p
	if w.Enabled != nil {
		q.Enabled = *w.Enabled
	}
	if w.Min != nil {
		q.Min = *w.Min
	}
	if w.Max != nil {
		q.Max = *w.Max
	}
	for _, f := range []struct {
		name string
		src  *string
		dst  *time.Duration
	}{
		{"expandWriteDelay", w.ExpandWriteDelay, &q.ExpandWriteDelay},
		{"maxConfirmWait", w.MaxConfirmWait, &q.MaxConfirmWait},
		{"shrinkReadDelay", w.ShrinkReadDelay, &q.ShrinkReadDelay},
		{"shrinkStableFor", w.ShrinkStableFor, &q.ShrinkStableFor},
		{"drainQuietFor", w.DrainQuietFor, &q.DrainQuietFor},
		{"offsetRetention", w.OffsetRetention, &q.OffsetRetention},
	} {
		if f.src == nil {
			continue
		}
		d, err := time.ParseDuration(*f.src)
		if err != nil {
			return fmt.Errorf("autoscale: policy %s %q is not a duration (want e.g. \"10s\", \"5m\")", f.name, *f.src)
		}
		*f.dst = d
	}
	*p = q
	return nil
}

// formatDuration is time.Duration.String without the zero units it appends: "1m" rather than
// "1m0s", "72h" rather than "72h0m0s". The result still parses with time.ParseDuration.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
