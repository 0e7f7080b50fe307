package abi_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/allocd/allocd/abi"
)

// -update rewrites testdata/golden/*.bin from the .json descriptions (and the derived vectors from
// their makers). Review the diff: a changed .bin is a changed wire format.
var update = flag.Bool("update", false, "rewrite the golden .bin files from their descriptions")

const goldenDir = "testdata/golden"

// golden is one vector's description, testdata/golden/NAME.json; NAME.bin holds its bytes.
// The format is documented in testdata/golden/README.md for codecs in other languages.
type golden struct {
	What     string        `json:"what"` // "request" or "response"
	About    string        `json:"about"`
	Request  *requestDesc  `json:"request,omitempty"`
	Response *responseDesc `json:"response,omitempty"`
	// DecodeOnly: the bytes are not what an encoder writes (a section of a kind unknown to v1.0,
	// a newer minor version), yet they decode to Request.
	DecodeOnly bool `json:"decodeOnly,omitempty"`
	// Invalid: a reader must refuse the bytes; the text says why.
	Invalid string `json:"invalid,omitempty"`
}

type requestDesc struct {
	Group         string            `json:"group"`
	Targets       []string          `json:"targets"`
	Queues        []abi.Queue       `json:"queues"`
	Consumers     []string          `json:"consumers"`
	QueueAttrs    []abi.Attrs       `json:"queueAttrs"`
	ConsumerAttrs []abi.Attrs       `json:"consumerAttrs"`
	PrevOwners    []string          `json:"prevOwners"`
	Config        map[string]string `json:"config"`
}

func (d *requestDesc) request() *abi.Request {
	return &abi.Request{
		Group: d.Group, Targets: d.Targets, Queues: d.Queues, Consumers: d.Consumers,
		QueueAttrs: d.QueueAttrs, ConsumerAttrs: d.ConsumerAttrs, PrevOwners: d.PrevOwners, Config: d.Config,
	}
}

type responseDesc struct {
	Results []resultDesc `json:"results"`
	// Owners describes an owner-form response (ABI 1.1, ABI.md §5.4) instead of Results.
	Owners []int32 `json:"owners"`
}

// resultDesc is {"indices":[...]} for an answer or {"error":"..."} for a failed result.
type resultDesc struct {
	Indices []int   `json:"indices,omitempty"`
	Error   *string `json:"error,omitempty"`
}

func (d *responseDesc) response() *abi.Response {
	if d.Owners != nil {
		return &abi.Response{Owners: d.Owners}
	}
	r := &abi.Response{Results: []abi.Result{}}
	for _, x := range d.Results {
		if x.Error != nil {
			r.Results = append(r.Results, abi.Result{Err: *x.Error, Failed: true})
		} else {
			r.Results = append(r.Results, abi.Result{Indices: x.Indices})
		}
	}
	return r
}

// normalize maps a request to the form the decoder produces, so two requests that encode alike
// compare equal with reflect.DeepEqual: Queues and Consumers are never nil, empty label and
// metric maps are nil. Targets, Config, the attribute slices and PrevOwners keep nil apart from
// empty, because the encoding does (a section absent versus present with no entries).
func normalize(r *abi.Request) *abi.Request {
	n := *r
	if n.Queues == nil {
		n.Queues = []abi.Queue{}
	}
	if n.Consumers == nil {
		n.Consumers = []string{}
	}
	n.QueueAttrs = normAttrs(n.QueueAttrs)
	n.ConsumerAttrs = normAttrs(n.ConsumerAttrs)
	return &n
}

func normAttrs(in []abi.Attrs) []abi.Attrs {
	if in == nil {
		return nil
	}
	out := make([]abi.Attrs, len(in))
	for i, a := range in {
		if len(a.Labels) > 0 {
			out[i].Labels = a.Labels
		}
		if len(a.Metrics) > 0 {
			out[i].Metrics = a.Metrics
		}
	}
	return out
}

// derived vectors are made from another vector's bytes, by hand, as a foreign or hostile writer
// would: they test what a reader accepts and refuses.
var derived = map[string]func(t *testing.T) []byte{
	// A v1.1 writer added a section of kind 99 between known ones; a v1.0 reader skips it.
	"req-unknown-section": func(t *testing.T) []byte {
		return withExtraSection(t, readBin(t, "req-whole-group"), 99, []byte("future!!"), 1)
	},
	"bad-magic": func(t *testing.T) []byte {
		b := readBin(t, "req-whole-group")
		copy(b, "ALRS")
		return b
	},
	"bad-major": func(t *testing.T) []byte {
		b := readBin(t, "req-whole-group")
		b[4] = 2
		return b
	},
	"bad-length": func(t *testing.T) []byte {
		b := readBin(t, "req-whole-group")
		return b[:len(b)-4] // the header still claims the full length
	},
	"bad-missing-strings": func(t *testing.T) []byte {
		b := readBin(t, "req-whole-group")
		setKind(t, b, abi.SectionStrings, 77) // the table is still there, under a kind v1 skips
		return b
	},
	"bad-duplicate-section": func(t *testing.T) []byte {
		b := readBin(t, "req-whole-group")
		setKind(t, b, abi.SectionConsumers, abi.SectionQueues)
		return b
	},
	"bad-misaligned-section": func(t *testing.T) []byte {
		b := readBin(t, "req-whole-group")
		d := dirOf(t, b, abi.SectionMeta)
		le32(b[d+4:], rd32(b[d+4:])+2)
		return b
	},
	"bad-string-id": func(t *testing.T) []byte {
		b := readBin(t, "req-whole-group")
		off := int(rd32(b[dirOf(t, b, abi.SectionConsumers)+4:]))
		le32(b[off+4:], 5) // consumer 0 refers to string 5 of 5
		return b
	},
	"bad-config-order": func(t *testing.T) []byte {
		b := readBin(t, "req-config")
		off := int(rd32(b[dirOf(t, b, abi.SectionConfig)+4:]))
		e0, e1 := slices.Clone(b[off+4:off+12]), slices.Clone(b[off+12:off+20])
		copy(b[off+4:], e1)
		copy(b[off+12:], e0)
		return b
	},
	"bad-label-owner": func(t *testing.T) []byte {
		b := readBin(t, "req-queue-attrs")
		off := int(rd32(b[dirOf(t, b, abi.SectionQueueLabels)+4:]))
		le32(b[off+4:], 3) // entry 0 names queue 3 of 3
		return b
	},
	"bad-prev-owners-count": func(t *testing.T) []byte {
		b := readBin(t, "req-prev-owners")
		off := int(rd32(b[dirOf(t, b, abi.SectionPrevOwners)+4:]))
		le32(b[off:], rd32(b[off:])-1)
		return b
	},
}

func rd32(b []byte) uint32    { return binary.LittleEndian.Uint32(b) }
func le32(b []byte, v uint32) { binary.LittleEndian.PutUint32(b, v) }

func setKind(t *testing.T, b []byte, from, to uint32) { le32(b[dirOf(t, b, from):], to) }

// dirOf returns the offset of the directory entry of section kind in request b.
func dirOf(t *testing.T, b []byte, kind uint32) int {
	t.Helper()
	for i := 0; i < int(rd32(b[12:])); i++ {
		if rd32(b[16+12*i:]) == kind {
			return 16 + 12*i
		}
	}
	t.Fatalf("no section of kind %d", kind)
	return 0
}

// withExtraSection inserts a directory entry of the given kind at position pos and appends its
// data at the end, moving the other sections 12 bytes on.
func withExtraSection(t *testing.T, b []byte, kind uint32, data []byte, pos int) []byte {
	t.Helper()
	n := int(rd32(b[12:]))
	out := slices.Clone(b[:16])
	for i := 0; i < n; i++ {
		if i == pos {
			out = append(out, make([]byte, 12)...)
		}
		e := slices.Clone(b[16+12*i : 28+12*i])
		le32(e[4:], rd32(e[4:])+12)
		out = append(out, e...)
	}
	out = append(out, b[16+12*n:]...)
	at := len(out)
	out = append(out, data...)
	for len(out)%4 != 0 {
		out = append(out, 0)
	}
	e := out[16+12*pos:]
	le32(e, kind)
	le32(e[4:], uint32(at))
	le32(e[8:], uint32(len(out)-at))
	le32(out[12:], uint32(n+1))
	le32(out[8:], uint32(len(out)))
	out[6] = 1 // minor version 1
	return out
}

func readBin(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(goldenDir, name+".bin"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func loadGolden(t *testing.T) (names []string, descs map[string]*golden) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden descriptions in %s: %v", goldenDir, err)
	}
	descs = map[string]*golden{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var g golden
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&g); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		names = append(names, name)
		descs[name] = &g
	}
	// Derived vectors read other vectors' bytes: make the plain ones first.
	slices.SortStableFunc(names, func(a, b string) int {
		_, da := derived[a]
		_, db := derived[b]
		switch {
		case da == db:
			return strings.Compare(a, b)
		case da:
			return 1
		}
		return -1
	})
	return names, descs
}

// TestGolden proves the codec against testdata/golden: every description encodes to its .bin
// byte for byte, every .bin decodes to its description, and every invalid vector is refused.
func TestGolden(t *testing.T) {
	names, descs := loadGolden(t)
	for _, name := range names {
		g := descs[name]
		path := filepath.Join(goldenDir, name+".bin")
		var want []byte
		switch mk := derived[name]; {
		case mk != nil:
			want = mk(t)
		case g.DecodeOnly || g.Invalid != "":
			t.Fatalf("%s: a decode-only or invalid vector needs a maker in derived", name)
		case g.What == "request":
			var err error
			if want, err = abi.EncodeRequest(nil, g.Request.request()); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		case g.What == "response":
			want = abi.EncodeResponse(nil, g.Response.response())
		default:
			t.Fatalf("%s: what is %q, want request or response", name, g.What)
		}
		txtPath := filepath.Join(goldenDir, name+".txt")
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			if g.Invalid == "" {
				if err := os.WriteFile(txtPath, []byte(annotate(want)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		t.Run(name, func(t *testing.T) {
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./abi -run TestGolden -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s differs from its description's encoding\nfile: %s\nwant: %s", path, hex.EncodeToString(got), hex.EncodeToString(want))
			}
			if g.Invalid == "" {
				txt, err := os.ReadFile(txtPath)
				if err != nil || string(txt) != annotate(got) {
					t.Errorf("%s is missing or stale (run go test ./abi -run TestGolden -update): %v", txtPath, err)
				}
			}
			switch {
			case g.Invalid != "":
				if g.What != "request" {
					t.Fatalf("invalid vectors are requests")
				}
				if _, err := abi.ParseRequest(got); err == nil {
					t.Fatalf("ParseRequest accepted a vector that is invalid because %s", g.Invalid)
				} else {
					t.Logf("refused as it must be: %v", err)
				}
			case g.What == "request":
				r, err := abi.DecodeRequest(got)
				if err != nil {
					t.Fatal(err)
				}
				if want := normalize(g.Request.request()); !reflect.DeepEqual(r, want) {
					t.Fatalf("decoded\n%#v\nwant\n%#v", r, want)
				}
			case g.What == "response":
				var r abi.Response
				if err := abi.DecodeResponse(got, &r); err != nil {
					t.Fatal(err)
				}
				if want := g.Response.response(); !r.Equal(want) || !slices.Equal(r.Owners, want.Owners) {
					t.Fatalf("decoded %+v, want %+v", r, want)
				}
			}
		})
	}
	// Every .bin and .txt has a description.
	for _, ext := range []string{".bin", ".txt"} {
		files, _ := filepath.Glob(filepath.Join(goldenDir, "*"+ext))
		for _, f := range files {
			if _, ok := descs[strings.TrimSuffix(filepath.Base(f), ext)]; !ok {
				t.Errorf("%s has no .json description", f)
			}
		}
	}
}

// TestABIDocExample checks that the hex dumps in ABI.md are the golden vectors they name, byte for
// byte, so the specification's worked example cannot drift from the code.
func TestABIDocExample(t *testing.T) {
	doc, err := os.ReadFile("ABI.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := docHexBlocks(t, string(doc))
	if len(blocks) < 2 {
		t.Fatalf("ABI.md has %d golden hex blocks, want at least the example request and response", len(blocks))
	}
	for name, got := range blocks {
		if want := readBin(t, name); !bytes.Equal(got, want) {
			t.Errorf("ABI.md's dump of %s differs from %s.bin\ndoc:  %x\nfile: %x", name, name, got, want)
		}
	}
}

// docHexBlocks returns the bytes of every fenced block that follows a line
// "<!-- golden: NAME -->". Each line of a block is "OFFSET: HEX BYTES  # comment"; the offsets
// must run on without a gap.
func docHexBlocks(t *testing.T, doc string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	lines := strings.Split(doc, "\n")
	for i := 0; i < len(lines); i++ {
		name, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), "<!-- golden: ")
		if !ok {
			continue
		}
		name = strings.TrimSpace(strings.TrimSuffix(name, "-->"))
		if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "```") {
			t.Fatalf("ABI.md line %d: golden marker not followed by a fenced block", i+1)
		}
		var b []byte
		for i += 2; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			line, _, _ := strings.Cut(lines[i], "#")
			off, data, ok := strings.Cut(line, ":")
			if !ok {
				if strings.TrimSpace(line) != "" {
					t.Fatalf("ABI.md line %d: %q has no offset", i+1, lines[i])
				}
				continue
			}
			var at int
			if _, err := fmt.Sscanf(strings.TrimSpace(off), "%x", &at); err != nil || at != len(b) {
				t.Fatalf("ABI.md line %d: offset %q, want %04x", i+1, off, len(b))
			}
			for _, f := range strings.Fields(data) {
				x, err := hex.DecodeString(f)
				if err != nil || len(x) != 1 {
					t.Fatalf("ABI.md line %d: %q is not one hex byte", i+1, f)
				}
				b = append(b, x[0])
			}
		}
		out[name] = b
	}
	return out
}

// -dump=NAME prints golden vector NAME in the annotated form of ABI.md and of the .txt files:
// go test ./abi -run TestDumpGolden -dump=req-whole-group -v
var dump = flag.String("dump", "", "print the annotated hex dump of golden vector NAME")

func TestDumpGolden(t *testing.T) {
	if *dump == "" {
		t.Skip("no -dump")
	}
	t.Log("\n" + annotate(readBin(t, *dump)))
}

// annotate returns the annotated hex dump of a well-formed request or response: one line per
// field, "OFFSET: BYTES  # meaning".
func annotate(b []byte) string {
	d := dumper{b: b}
	switch string(b[:4]) {
	case abi.ResponseMagic:
		d.response()
	case abi.OwnersMagic:
		d.owners()
	default:
		d.request()
	}
	return d.out.String()
}

type dumper struct {
	b   []byte
	at  int
	out strings.Builder
}

// line prints the next n bytes with a comment.
func (d *dumper) line(n int, format string, args ...any) {
	fmt.Fprintf(&d.out, "%04x:", d.at)
	for _, c := range d.b[d.at : d.at+n] {
		fmt.Fprintf(&d.out, " %02x", c)
	}
	fmt.Fprintf(&d.out, "%*s# %s\n", 2+3*max(0, 16-n), "", fmt.Sprintf(format, args...))
	d.at += n
}

func (d *dumper) u32(at int) uint32 { return rd32(d.b[d.at+at:]) }

var kindNames = map[uint32]string{
	abi.SectionStrings: "STRINGS", abi.SectionMeta: "META", abi.SectionQueues: "QUEUES",
	abi.SectionConsumers: "CONSUMERS", abi.SectionTargets: "TARGETS", abi.SectionConfig: "CONFIG",
	abi.SectionQueueLabels: "QUEUE_LABELS", abi.SectionQueueMetrics: "QUEUE_METRICS",
	abi.SectionConsumerLabels: "CONSUMER_LABELS", abi.SectionConsumerMetrics: "CONSUMER_METRICS",
	abi.SectionPrevOwners: "PREV_OWNERS",
}

func (d *dumper) request() {
	d.line(4, "magic %q", d.b[:4])
	d.line(4, "major %d, minor %d", uint16(d.u32(0)), d.u32(0)>>16)
	d.line(4, "total length %d", d.u32(0))
	n := int(d.u32(0))
	d.line(4, "%d sections", n)
	type sec struct{ kind, off, n uint32 }
	var secs []sec
	for i := range n {
		s := sec{d.u32(0), d.u32(4), d.u32(8)}
		secs = append(secs, s)
		name := kindNames[s.kind]
		if name == "" {
			name = "(unknown)"
		}
		d.line(12, "directory %d: kind %d %s at 0x%04x, %d bytes", i, s.kind, name, s.off, s.n)
	}
	slices.SortFunc(secs, func(a, b sec) int { return int(a.off) - int(b.off) })
	for _, s := range secs {
		end := int(s.off + s.n)
		name := kindNames[s.kind]
		count := int(d.u32(0))
		switch s.kind {
		case abi.SectionMeta:
			d.line(4, "META: group = string %d", d.u32(0))
			d.line(4, "META: reserved, 0")
		case abi.SectionQueues:
			d.line(4, "QUEUES: %d queues", count)
			for i := range count {
				d.line(12, "queue %d: topic string %d, broker string %d, queue id %d", i, d.u32(0), d.u32(4), int32(d.u32(8)))
			}
		case abi.SectionConsumers, abi.SectionTargets:
			d.line(4, "%s: %d ids", name, count)
			for i := range count {
				d.line(4, "%s %d: string %d", strings.ToLower(name[:len(name)-1]), i, d.u32(0))
			}
		case abi.SectionConfig:
			d.line(4, "CONFIG: %d entries", count)
			for i := range count {
				d.line(8, "config %d: key string %d, value string %d", i, d.u32(0), d.u32(4))
			}
		case abi.SectionQueueLabels, abi.SectionConsumerLabels:
			d.line(4, "%s: %d entries", name, count)
			for i := range count {
				d.line(12, "label %d: owner %d, key string %d, value string %d", i, d.u32(0), d.u32(4), d.u32(8))
			}
		case abi.SectionQueueMetrics, abi.SectionConsumerMetrics:
			d.line(4, "%s: %d entries", name, count)
			for i := range count {
				v := int64(uint64(d.u32(8)) | uint64(d.u32(12))<<32)
				d.line(16, "metric %d: owner %d, key string %d, value %d", i, d.u32(0), d.u32(4), v)
			}
		case abi.SectionPrevOwners:
			d.line(4, "PREV_OWNERS: %d entries", count)
			for i := range count {
				if id := d.u32(0); id == abi.NoString {
					d.line(4, "queue %d: none (NoString)", i)
				} else {
					d.line(4, "queue %d: string %d", i, id)
				}
			}
		case abi.SectionStrings:
			d.line(4, "STRINGS: %d strings", count)
			base := d.at + 4*(count+1)
			for i := 0; i <= count; i++ {
				d.line(4, "offset %d = %d", i, d.u32(0))
			}
			for i := range count {
				from, to := rd32(d.b[base-4*(count+1)+4*i:]), rd32(d.b[base-4*(count+1)+4*i+4:])
				for from < to { // long strings take several lines
					n := min(to-from, 16)
					d.line(int(n), "string %d = %q", i, d.b[base+int(from):base+int(from+n)])
					from += n
				}
			}
		default:
			for d.at < end {
				d.line(min(end-d.at, 4), "kind %d data, skipped by a v1.0 reader", s.kind)
			}
		}
		for d.at < end {
			d.line(min(end-d.at, 4), "padding")
		}
	}
}

func (d *dumper) owners() {
	d.line(4, "magic %q (owner form)", d.b[:4])
	d.line(4, "major %d, minor %d", uint16(d.u32(0)), d.u32(0)>>16)
	d.line(4, "total length %d", d.u32(0))
	n := int(d.u32(0))
	d.line(4, "%d queues", n)
	for i := range n {
		if o := int32(d.u32(0)); o == abi.NoOwner {
			d.line(4, "queue %d: no owner", i)
		} else {
			d.line(4, "queue %d: consumer %d", i, o)
		}
	}
}

func (d *dumper) response() {
	d.line(4, "magic %q", d.b[:4])
	d.line(4, "major %d, minor %d", uint16(d.u32(0)), d.u32(0)>>16)
	d.line(4, "total length %d", d.u32(0))
	n := int(d.u32(0))
	d.line(4, "%d results", n)
	for i := range n {
		status, c := d.u32(0), int(d.u32(4))
		if status == abi.StatusOK {
			d.line(8, "result %d: status 0 (ok), %d indices", i, c)
			for range c {
				d.line(4, "index %d", d.u32(0))
			}
		} else {
			d.line(8, "result %d: status 1 (error), %d-byte message", i, c)
			for from, end := 0, (c+3)&^3; from < end; from += 16 {
				n := min(end-from, 16)
				d.line(n, "message %q%s", d.b[d.at:d.at+min(n, max(c-from, 0))], map[bool]string{true: ", zero padding"}[from+n > c])
			}

		}
	}
}
