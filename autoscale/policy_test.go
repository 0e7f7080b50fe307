package autoscale_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/allocd/allocd/autoscale"
)

func TestDefaultPolicy(t *testing.T) {
	p := autoscale.DefaultPolicy()
	want := autoscale.Policy{
		Enabled:          false,
		Min:              1,
		Max:              1024,
		ExpandWriteDelay: 10 * time.Second,
		MaxConfirmWait:   60 * time.Second,
		ShrinkReadDelay:  5 * time.Minute,
		ShrinkStableFor:  60 * time.Second,
		DrainQuietFor:    60 * time.Second,
		OffsetRetention:  72 * time.Hour,
	}
	if p != want {
		t.Fatalf("DefaultPolicy() = %+v, want %+v", p, want)
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("DefaultPolicy().Validate() = %v", err)
	}
}

func TestPolicyValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*autoscale.Policy)
		want   []string // substrings, one per expected error
	}{
		{"min 0", func(p *autoscale.Policy) { p.Min = 0 }, []string{"policy min 0 out of range: must be at least 1"}},
		{"max below min", func(p *autoscale.Policy) { p.Min, p.Max = 8, 4 }, []string{"policy max 4 below min 8"}},
		{"max too large", func(p *autoscale.Policy) { p.Max = autoscale.MaxQueues + 1 },
			[]string{"policy max 65537 out of range: must be at most 65536"}},
		{"min equals max", func(p *autoscale.Policy) { p.Min, p.Max = 4, 4 }, nil},
		{"negative delay", func(p *autoscale.Policy) { p.ExpandWriteDelay = -time.Second },
			[]string{"policy expandWriteDelay -1s is negative"}},
		{"negative stable", func(p *autoscale.Policy) { p.ShrinkStableFor = -time.Minute },
			[]string{"policy shrinkStableFor -1m is negative"}},
		{"negative quiet", func(p *autoscale.Policy) { p.DrainQuietFor = -1 },
			[]string{"policy drainQuietFor -1ns is negative"}},
		{"negative retention", func(p *autoscale.Policy) { p.OffsetRetention = -time.Hour },
			[]string{"policy offsetRetention -1h is negative"}},
		{"confirm shorter than delay", func(p *autoscale.Policy) { p.MaxConfirmWait = 5 * time.Second },
			[]string{"policy maxConfirmWait 5s shorter than expandWriteDelay 10s"}},
		{"confirm equals delay", func(p *autoscale.Policy) { p.MaxConfirmWait = p.ExpandWriteDelay }, nil},
		{"zero read delay", func(p *autoscale.Policy) { p.ShrinkReadDelay = 0 },
			[]string{"policy shrinkReadDelay 0s must be positive"}},
		{"zero stable and quiet and retention", func(p *autoscale.Policy) {
			p.ShrinkStableFor, p.DrainQuietFor, p.OffsetRetention, p.ExpandWriteDelay, p.MaxConfirmWait = 0, 0, 0, 0, 0
		}, nil},
		{"several at once", func(p *autoscale.Policy) { p.Min, p.Max, p.ShrinkReadDelay = 0, -1, -time.Second },
			[]string{"min 0 out of range", "max -1 below min 0", "shrinkReadDelay -1s must be positive"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := autoscale.DefaultPolicy()
			tc.change(&p)
			err := p.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tc.want)
			}
			msg := err.Error()
			if got := len(strings.Split(msg, "\n")); got != len(tc.want) {
				t.Errorf("Validate() gave %d errors, want %d:\n%s", got, len(tc.want), msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("Validate() = %q, want it to contain %q", msg, w)
				}
			}
			if _, err := autoscale.New("t", p, nil); err == nil {
				t.Errorf("New accepted the policy Validate refused")
			}
		})
	}
}

func TestPolicyJSON(t *testing.T) {
	// The body of PUT /v1/topics/{topic} under "autoscale": fields it omits keep the
	// defaults of the Policy it is decoded into.
	p := autoscale.DefaultPolicy()
	body := `{"enabled":true,"min":1,"max":64,"expandWriteDelay":"10s","maxConfirmWait":"60s","shrinkReadDelay":"5m","shrinkStableFor":"60s"}`
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	want := autoscale.DefaultPolicy()
	want.Enabled, want.Max = true, 64
	if p != want {
		t.Fatalf("decoded %+v, want %+v", p, want)
	}

	js, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	const wantJS = `{"enabled":true,"min":1,"max":64,"expandWriteDelay":"10s","maxConfirmWait":"1m","shrinkReadDelay":"5m","shrinkStableFor":"1m","drainQuietFor":"1m","offsetRetention":"72h"}`
	if string(js) != wantJS {
		t.Fatalf("encoded %s\nwant    %s", js, wantJS)
	}
	var back autoscale.Policy
	if err := json.Unmarshal(js, &back); err != nil || back != p {
		t.Fatalf("round trip: %+v, %v", back, err)
	}

	for _, tc := range []struct{ body, want string }{
		{`{"shrinkReadDelay":"5x"}`, `policy shrinkReadDelay "5x" is not a duration`},
		{`{"shrinkReadDelay":300}`, `cannot unmarshal number`},
		{`{"shrinkReadDely":"5m"}`, `unknown field "shrinkReadDely"`},
		{`{"min":"1"}`, `cannot unmarshal string`},
	} {
		p := autoscale.DefaultPolicy()
		err := json.Unmarshal([]byte(tc.body), &p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Unmarshal(%s) = %v, want an error containing %q", tc.body, err, tc.want)
		}
		if p != autoscale.DefaultPolicy() {
			t.Errorf("Unmarshal(%s) failed but changed the policy to %+v", tc.body, p)
		}
	}
}
