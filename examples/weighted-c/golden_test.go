package weightedc_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/allocd/allocd/abi"
)

// The C codec proves itself against the golden vectors of abi/testdata/golden, natively: a
// driver built with the machine's C compiler (and its address and undefined-behaviour
// sanitizers) decodes every request and prints it field by field, which must be what the vector's
// description says; refuses every bad vector; and writes every response, which must be the
// vector's bytes.

const goldenDir = "../../abi/testdata/golden"

var (
	driverOnce sync.Once
	driverPath string
	driverErr  error
)

func driver(t testing.TB) string {
	t.Helper()
	driverOnce.Do(func() {
		dir, err := os.MkdirTemp("", "weighted-c-driver-")
		if err != nil {
			driverErr = err
			return
		}
		driverPath = filepath.Join(dir, "driver")
		cc := os.Getenv("CC")
		if cc == "" {
			cc = "cc"
		}
		out, err := exec.Command(cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-g", "-fsanitize=address,undefined",
			"-fno-sanitize-recover=all", "-o", driverPath, "test/driver.c", "src/abi.c", "src/strategy.c").CombinedOutput()
		if err != nil {
			driverErr = fmt.Errorf("building the C driver with %s (needs a C compiler, such as gcc): %v\n%s", cc, err, out)
		}
	})
	if driverErr != nil {
		t.Fatal(driverErr)
	}
	return driverPath
}

// runDriver runs the driver; ok is false when it refused the input (exit status 1). Anything
// else (a crash, a sanitizer's report) fails the test.
func runDriver(t testing.TB, stdin []byte, args ...string) (out []byte, ok bool) {
	t.Helper()
	cmd := exec.Command(driver(t), args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	switch {
	case err == nil && stderr.Len() == 0:
		return out, true
	case errors.As(err, &exit) && exit.ExitCode() == 1 && stderr.Len() == 0:
		return out, false
	}
	t.Fatalf("driver %v: %v\nstdout %s\nstderr %s", args, err, out, stderr.String())
	return nil, false
}

type golden struct {
	What    string `json:"what"`
	Invalid string `json:"invalid"`
	Request *struct {
		Group         string            `json:"group"`
		Targets       []string          `json:"targets"`
		Queues        []abi.Queue       `json:"queues"`
		Consumers     []string          `json:"consumers"`
		QueueAttrs    []abi.Attrs       `json:"queueAttrs"`
		ConsumerAttrs []abi.Attrs       `json:"consumerAttrs"`
		PrevOwners    []string          `json:"prevOwners"`
		Config        map[string]string `json:"config"`
	} `json:"request"`
	Response *struct {
		Results []struct {
			Indices []int   `json:"indices"`
			Error   *string `json:"error"`
		} `json:"results"`
		Owners []int32 `json:"owners"`
	} `json:"response"`
}

func hx(s string) string {
	if s == "" {
		return "-"
	}
	return hex.EncodeToString([]byte(s))
}

// dump writes a request as the driver's dump does.
func dump(r *abi.Request) string {
	var b strings.Builder
	fmt.Fprintf(&b, "group %s\n", hx(r.Group))
	for _, q := range r.Queues {
		fmt.Fprintf(&b, "queue %s %s %d\n", hx(q.Topic), hx(q.BrokerName), q.QueueID)
	}
	for _, c := range r.Consumers {
		fmt.Fprintf(&b, "consumer %s\n", hx(c))
	}
	if r.Targets == nil {
		b.WriteString("targets none\n")
	}
	for _, t := range r.Targets {
		fmt.Fprintf(&b, "target %s index %d\n", hx(t), slices.Index(r.Consumers, t))
	}
	if r.Config == nil {
		b.WriteString("config none\n")
	} else {
		b.WriteString("config present\n")
		keys := make([]string, 0, len(r.Config))
		for k := range r.Config {
			keys = append(keys, k)
		}
		slices.Sort(keys) // byte-wise, as the section is
		for _, k := range keys {
			fmt.Fprintf(&b, "config %s %s\n", hx(k), hx(r.Config[k]))
		}
	}
	attrs := func(what string, as []abi.Attrs) {
		if as == nil {
			fmt.Fprintf(&b, "%s none\n", what)
			return
		}
		fmt.Fprintf(&b, "%s present\n", what)
		for i, a := range as {
			for _, k := range sortedKeys(a.Labels) {
				fmt.Fprintf(&b, "%s label %d %s %s\n", what, i, hx(k), hx(a.Labels[k]))
			}
		}
		for i, a := range as {
			for _, k := range sortedKeys(a.Metrics) {
				fmt.Fprintf(&b, "%s metric %d %s %d\n", what, i, hx(k), a.Metrics[k])
			}
		}
	}
	attrs("queue", r.QueueAttrs)
	attrs("consumer", r.ConsumerAttrs)
	if r.PrevOwners == nil {
		b.WriteString("prev none\n")
	}
	for _, o := range r.PrevOwners {
		if o == "" {
			b.WriteString("prev none\n")
		} else {
			fmt.Fprintf(&b, "prev %s\n", hx(o))
		}
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func TestGoldenVectors(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	if err != nil || len(files) < 20 {
		t.Fatalf("golden vectors: %v, %d files", err, len(files))
	}
	var reqs, bads, resps int
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			var g golden
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &g); err != nil {
				t.Fatal(err)
			}
			bin := strings.TrimSuffix(f, ".json") + ".bin"
			switch {
			case g.What == "request" && g.Invalid != "":
				bads++
				if out, ok := runDriver(t, nil, "dump", bin); ok || !strings.HasPrefix(string(out), "error: abi: ") {
					t.Errorf("the C reader accepted a bad vector (%s):\n%s", g.Invalid, out)
				}
			case g.What == "request":
				reqs++
				r := g.Request
				want := dump(&abi.Request{Group: r.Group, Targets: r.Targets, Queues: r.Queues, Consumers: r.Consumers,
					QueueAttrs: r.QueueAttrs, ConsumerAttrs: r.ConsumerAttrs, PrevOwners: r.PrevOwners, Config: r.Config})
				out, ok := runDriver(t, nil, "dump", bin)
				if !ok || string(out) != want {
					t.Errorf("the C reader read\n%s\nwant\n%s", out, want)
				}
			case g.What == "response" && g.Response.Owners != nil:
				// ABI 1.1's owner form (ABI.md §5.4): this codec speaks 1.0, whose plugins
				// never write it, so there is nothing of it to compare.
				t.Logf("owner-form vector: not part of a 1.0 codec")
			case g.What == "response":
				resps++
				var in strings.Builder
				for _, res := range g.Response.Results {
					if res.Error != nil {
						fmt.Fprintf(&in, "error %s\n", hex.EncodeToString([]byte(*res.Error)))
						continue
					}
					in.WriteString("ok")
					for _, x := range res.Indices {
						fmt.Fprintf(&in, " %d", x)
					}
					in.WriteString("\n")
				}
				want, err := os.ReadFile(bin)
				if err != nil {
					t.Fatal(err)
				}
				out, ok := runDriver(t, []byte(in.String()), "resp")
				// The C writer is a 1.0 writer: its header says minor 0 where allocd's says
				// its own; readers ignore the minor (ABI.md §5.1), so compare all but it.
				if ok && len(out) >= 8 && len(want) >= 8 {
					if out[6] != 0 || out[7] != 0 {
						t.Errorf("the C writer's minor version is %x, want 0", out[6:8])
					}
					out = append(append([]byte{}, out[:6]...), append(want[6:8:8], out[8:]...)...)
				}
				if !ok || !bytes.Equal(out, want) {
					t.Errorf("the C writer wrote\n%x\nwant\n%x", out, want)
				}
			default:
				t.Fatalf("vector of unknown kind %q", g.What)
			}
		})
	}
	if reqs < 10 || bads < 8 || resps < 4 {
		t.Errorf("%d requests, %d bad vectors, %d responses: the golden folder lost vectors", reqs, bads, resps)
	}
}

// TestCodecAgreesOnMutations: 400 golden requests with a few bytes changed, each read by the C
// reader and by Go's: both refuse it, or both read the same request.
func TestCodecAgreesOnMutations(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(goldenDir, "req-*.bin"))
	var seeds [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	dir := t.TempDir()
	accepted := 0
	for i := range 400 {
		in := slices.Clone(seeds[rng.IntN(len(seeds))])
		for range 1 + rng.IntN(3) {
			in[rng.IntN(len(in))] = byte(rng.IntN(256))
		}
		if agree(t, filepath.Join(dir, fmt.Sprintf("m%d.bin", i)), in) {
			accepted++
		}
	}
	if accepted < 20 || accepted > 380 {
		t.Errorf("%d of 400 mutations were read: the mutations are too mild or too harsh to test both paths", accepted)
	}
}

// agree reads in with both readers, fails the test where they disagree, and says whether they
// read it.
func agree(t *testing.T, path string, in []byte) bool {
	t.Helper()
	if err := os.WriteFile(path, in, 0o644); err != nil {
		t.Fatal(err)
	}
	out, ok := runDriver(t, nil, "dump", path)
	r, err := abi.DecodeRequest(in)
	if ok != (err == nil) {
		t.Fatalf("on %x the C reader says %q, Go's reader %v", in, firstLine(out), err)
	}
	if ok && string(out) != dump(r) {
		t.Fatalf("on %x the C reader read\n%s\nGo's\n%s", in, out, dump(r))
	}
	return ok
}

// FuzzCodec: on any bytes the C reader neither crashes nor trips a sanitizer, refuses exactly
// what Go's reader refuses, and reads what Go's reads.
func FuzzCodec(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(goldenDir, "*.bin"))
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil && bytes.HasPrefix(b, []byte("ALRQ")) {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		agree(t, filepath.Join(t.TempDir(), "req.bin"), in)
	})
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	return s
}
