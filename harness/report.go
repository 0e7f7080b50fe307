package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText writes the report as readable tables: the checks, the movement figure, the cost,
// and each failure with its smallest scenario as one JSON line.
func (r *Report) WriteText(w io.Writer) error {
	var b bytes.Buffer
	promises := "nothing"
	if len(r.Plugin.Properties) > 0 {
		promises = strings.Join(r.Plugin.Properties, ", ")
	}
	abiVersion := ""
	if r.Plugin.ABI != "" {
		abiVersion = " (ABI " + r.Plugin.ABI + ")"
	}
	fmt.Fprintf(&b, "plugin     %s %s%s, promises %s\n", r.Plugin.Name, r.Plugin.Version, abiVersion, promises)
	if r.Reference != nil {
		fmt.Fprintf(&b, "reference  %s %s\n", r.Reference.Name, r.Reference.Version)
	}
	fmt.Fprintf(&b, "run        seed %d, %d scenarios, %d calls, %s\n\n", r.Seed, r.Scenarios, r.Calls, r.Elapsed.Round(time.Millisecond))

	for _, c := range r.Checks {
		fmt.Fprintf(&b, "%-12s %s: %s\n", c.Name, statusWord(c.Status), c.Detail)
	}
	fmt.Fprintln(&b)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "MOVEMENT\tROUNDS\tQUEUES\tMOVED\tMINIMUM\tMOVED/MIN\tBETWEEN STAYERS\tFORCED\t")
	for _, m := range r.Stability {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.2f\t%d\t%d\t\n", m.Event, m.Rounds, m.Queues, m.Moved, m.Minimum, m.Ratio(), m.BetweenStayers, m.Forced)
	}
	tw.Flush()

	c := r.Cost
	fmt.Fprintln(&b)
	fmt.Fprintf(&b, "latency    p50 %s  p90 %s  p99 %s  max %s  (%d sequential calls)\n",
		round(c.P50), round(c.P90), round(c.P99), round(c.Max), c.Calls)
	source := "live Go heap after GC, which holds the plugin instances' linear memory"
	if c.MemorySource == "host" {
		source = "memory the host reports for the plugin's instances"
	}
	fmt.Fprintf(&b, "memory     %s across the run (%s: %s -> %s)\n", signedBytes(c.MemoryGrowth()), source, bytesText(c.MemoryBefore), bytesText(c.MemoryAfter))
	if len(r.Host) > 0 {
		parts := make([]string, len(r.Host))
		for i, h := range r.Host {
			parts[i] = fmt.Sprintf("%d %s", h.Value, h.Name)
		}
		fmt.Fprintf(&b, "host       %s\n", strings.Join(parts, ", "))
	}

	for i, f := range r.Failures {
		if i == 0 {
			fmt.Fprintln(&b, "\nFAILURES")
		}
		fmt.Fprintf(&b, "\n%d. %s: %s\n", i+1, f.Check, f.Reason)
		fmt.Fprintf(&b, "   first seen in %s\n", f.FirstSeen)
		if f.Occurrences > 1 {
			fmt.Fprintf(&b, "   %d failing scenarios, calls or vectors in all\n", f.Occurrences)
		}
		if f.Scenario != nil {
			what := "smallest scenario"
			if !f.Shrunk {
				what = "scenario"
			}
			fmt.Fprintf(&b, "   %s (%s)", what, f.Scenario.Size())
			if f.Event != nil {
				fmt.Fprintf(&b, ", then the %s of %q (the plugin's answer gives the previous owners)", f.Event.Kind, f.Event.Consumer)
			}
			fmt.Fprintln(&b, "; paste it into `allocd allocate --plugin NAME` or harness.Scenario:")
			line, err := scenarioJSON(f.Scenario)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "   %s\n", line)
			if f.Event != nil {
				ev, _ := json.Marshal(f.Event)
				fmt.Fprintf(&b, "   event: %s\n", ev)
			}
		}
	}
	fmt.Fprintln(&b)
	if r.Passed() {
		fmt.Fprintln(&b, "PASS")
	} else {
		fmt.Fprintf(&b, "FAIL: %s\n", plural(len(r.Failures), "check")+" failed")
	}
	_, err := w.Write(b.Bytes())
	return err
}

// scenarioJSON is the scenario as one JSON line, without HTML escaping.
func scenarioJSON(s *Scenario) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return "", err
	}
	return strings.TrimSpace(b.String()), nil
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	default:
		return d.Round(100 * time.Nanosecond)
	}
}

func bytesText(n int64) string {
	switch a := max(n, -n); {
	case a >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case a >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%d B", n)
	}
}

func signedBytes(n int64) string {
	if n >= 0 {
		return "+" + bytesText(n)
	}
	return bytesText(n)
}

// statusWord is how the text report writes a check's status: a failure stands out.
func statusWord(status string) string {
	switch status {
	case Pass:
		return "ok"
	case Fail:
		return "FAIL"
	}
	return status
}
