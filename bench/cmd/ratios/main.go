// Command ratios reads the output of rounds of BenchmarkPeers (bench/peers_test.go) and prints,
// for each of issue 17's goals, the ratio of allocd's time to its peer's in every round: the
// median, the range, how many rounds met the goal, and the CPU the rows ran on.
//
//	ratios [-goals=false] file...
//
// A round is one run of the benchmark binary that times every row once, as
// scripts/sidebyside.sh makes them: the k-th time of one row is paired with the k-th time of
// the other, so a ratio is always of two times taken minutes apart at most, under the same load.
// A row that appears a different number of times from its partner is an error, not a guess.
//
// The exit status is 1 when a ratio's median misses its goal (with -goals, the default), 2 on
// bad input: a script can tell a missed goal from a broken run.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"golang.org/x/perf/benchfmt"
)

// A ratio is num's time over den's, both rows of BenchmarkPeers named without "Peers/" and
// without GOMAXPROCS, and the goal the ratio must stay at or under (0: shown, no goal).
type ratio struct {
	num, den string
	goal     float64
}

// goals are issue 17's (item 2): averagely and circle at most 0.5x the Go client's 64 calls,
// hash at most 0.01x, and wasm at most 2x native. The native rows' ratio to the client is shown
// for scale. hash's wasm guest remembers the last group's hashes (hash.Memo): its wasm row, the
// same group again, is also set beside native-memo, which remembers them too, and its wasm-cold
// row (two groups by turns, nothing remembered) beside native, which remembers nothing.
var goals = []ratio{
	{"averagely/wasm", "averagely/rocketmq-go", 0.5},
	{"averagely/wasm-owners", "averagely/rocketmq-go", 0.5},
	{"averagely/embed-assign", "averagely/rocketmq-go", 0.5},
	{"averagely/native", "averagely/rocketmq-go", 0},
	{"averagely/wasm", "averagely/native", 2},
	{"circle/wasm", "circle/rocketmq-go", 0.5},
	{"circle/wasm-owners", "circle/rocketmq-go", 0.5},
	{"circle/embed-assign", "circle/rocketmq-go", 0.5},
	{"circle/native", "circle/rocketmq-go", 0},
	{"circle/wasm", "circle/native", 2},
	{"hash/wasm", "hash/rocketmq-go", 0.01},
	{"hash/wasm-rebalance", "hash/rocketmq-go", 0.01},
	{"hash/wasm-cold", "hash/rocketmq-go", 0.01},
	{"hash/native", "hash/rocketmq-go", 0},
	{"hash/wasm", "hash/native", 2},
	{"hash/wasm", "hash/native-memo", 2},
	{"hash/wasm-cold", "hash/native", 2},
}

func main() {
	check := flag.Bool("goals", true, "exit with status 1 when a ratio's median misses its goal")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: ratios [-goals=false] file... (go test -bench output of BenchmarkPeers, one run per round)")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	runs := &rows{times: map[string][]float64{}, cpus: map[string]bool{}}
	for _, name := range flag.Args() {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "ratios:", err)
			os.Exit(2)
		}
		err = runs.read(f, name)
		f.Close()
		if err != nil {
			fmt.Fprintln(os.Stderr, "ratios:", err)
			os.Exit(2)
		}
	}
	table, missed, err := report(runs, goals)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ratios:", err)
		os.Exit(2)
	}
	fmt.Print(table)
	if *check && len(missed) > 0 {
		fmt.Fprintf(os.Stderr, "ratios: goals missed by the median: %s\n", strings.Join(missed, "; "))
		os.Exit(1)
	}
}

// rows holds every BenchmarkPeers row's times in seconds an operation, in the order read, and
// the CPUs the runs named.
type rows struct {
	times map[string][]float64
	order []string
	cpus  map[string]bool
}

// read adds the results of one go test -bench output.
func (rs *rows) read(r io.Reader, name string) error {
	br := benchfmt.NewReader(r, name)
	for br.Scan() {
		switch rec := br.Result().(type) {
		case *benchfmt.SyntaxError:
			return rec
		case *benchfmt.Result:
			base, parts := rec.Name.Parts()
			if string(base) != "Peers" {
				continue
			}
			var key strings.Builder
			for _, p := range parts {
				if p[0] == '/' {
					key.Write(p)
				}
			}
			k := strings.TrimPrefix(key.String(), "/")
			sec, ok := rec.Value("sec/op")
			if !ok || sec <= 0 {
				file, line := rec.Pos()
				return fmt.Errorf("%s:%d: %s has no time an operation", file, line, rec.Name)
			}
			if _, seen := rs.times[k]; !seen {
				rs.order = append(rs.order, k)
			}
			rs.times[k] = append(rs.times[k], sec)
			if cpu := rec.GetConfig("cpu"); cpu != "" {
				rs.cpus[cpu] = true
			}
		}
	}
	return br.Err()
}

// report formats the ratios present in rs as a Markdown table, then every row's median time. A
// ratio is left out when one of its rows was not run at all (a run of some rows only); both run,
// but a different number of times, is an error. missed names the ratios whose median is over
// their goal.
func report(rs *rows, ratios []ratio) (table string, missed []string, err error) {
	if len(rs.order) == 0 {
		return "", nil, errors.New("no BenchmarkPeers results")
	}
	var b strings.Builder
	cpus := slices.Sorted(maps.Keys(rs.cpus))
	if len(cpus) == 0 {
		cpus = []string{"(not given: the runs have no cpu: line)"}
	}
	fmt.Fprintf(&b, "CPU: %s\n\n", strings.Join(cpus, "; "))
	fmt.Fprintln(&b, "| ratio | median | range | goal | rounds within it |")
	fmt.Fprintln(&b, "|---|---:|---:|---:|---:|")
	for _, r := range ratios {
		nums, dens := rs.times[r.num], rs.times[r.den]
		if len(nums) == 0 || len(dens) == 0 {
			continue
		}
		if len(nums) != len(dens) {
			return "", nil, fmt.Errorf("%s ran %d times and %s %d: a round lacks one of them", r.num, len(nums), r.den, len(dens))
		}
		per := make([]float64, len(nums))
		within := 0
		for i := range nums {
			per[i] = nums[i] / dens[i]
			if per[i] <= r.goal {
				within++
			}
		}
		med := median(per)
		goal, rounds := "", ""
		if r.goal > 0 {
			goal = fmt.Sprintf("≤ %sx", num(r.goal))
			rounds = fmt.Sprintf("%d of %d", within, len(per))
			if med > r.goal {
				goal += " **missed**"
				missed = append(missed, fmt.Sprintf("%s / %s %sx (goal %sx)", r.num, r.den, num(med), num(r.goal)))
			}
		}
		fmt.Fprintf(&b, "| %s / %s | %sx | %s-%sx | %s | %s |\n", r.num, r.den, num(med), num(slices.Min(per)), num(slices.Max(per)), goal, rounds)
	}
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "| row | rounds | median | range |")
	fmt.Fprintln(&b, "|---|---:|---:|---:|")
	for _, k := range rs.order {
		t := rs.times[k]
		fmt.Fprintf(&b, "| %s | %d | %s | %s-%s |\n", k, len(t), duration(median(t)), duration(slices.Min(t)), duration(slices.Max(t)))
	}
	return b.String(), missed, nil
}

// median of a non-empty list: the middle value, or the mean of the two middle ones.
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// num formats a ratio: two decimals, four under 0.01 (hash's goal).
func num(x float64) string {
	switch {
	case x >= 10:
		return fmt.Sprintf("%.0f", x)
	case x >= 0.01:
		return fmt.Sprintf("%.2f", x)
	default:
		return fmt.Sprintf("%.4f", x)
	}
}

// duration formats seconds as ns, µs or ms with three significant digits.
func duration(sec float64) string {
	switch {
	case sec >= 1e-3:
		return fmt.Sprintf("%.3g ms", sec*1e3)
	case sec >= 1e-6:
		return fmt.Sprintf("%.3g µs", sec*1e6)
	default:
		return fmt.Sprintf("%.3g ns", sec*1e9)
	}
}
