package model

import "time"

// PluginCalls are the daemon's allocation calls to one plugin since it started (rebalances and
// previews, every version): how many, how many failed, and their latency. P50 and P99 are read
// from power-of-two buckets, so they are within a factor of two of the true percentile.
type PluginCalls struct {
	Calls  int64         `json:"calls"`
	Errors int64         `json:"errors"`
	Mean   time.Duration `json:"meanNs"`
	P50    time.Duration `json:"p50Ns"`
	P99    time.Duration `json:"p99Ns"`
	Max    time.Duration `json:"maxNs"`
	Last   time.Time     `json:"last,omitzero"`
}

// CheckReport is the harness's quick pass over one version of a plugin, run before that version
// may serve (`allocd check` runs the long one).
type CheckReport struct {
	Hash      string        `json:"hash"`
	At        time.Time     `json:"at"`
	Passed    bool          `json:"passed"`
	Scenarios int           `json:"scenarios"`
	Calls     int64         `json:"calls"`
	Elapsed   time.Duration `json:"elapsedNs"`
	// P50, P99 and Max are the latency of the harness's sequential calls.
	P50    time.Duration `json:"p50Ns"`
	P99    time.Duration `json:"p99Ns"`
	Max    time.Duration `json:"maxNs"`
	Checks []CheckLine   `json:"checks"`
	// Error is why the pass failed ("" when it passed).
	Error string `json:"error,omitempty"`
}

// CheckLine is one check of a CheckReport: its name, pass, fail, skip or figure, and what it
// found.
type CheckLine struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
}
