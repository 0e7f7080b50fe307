package loopcheck_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/allocd/allocd/host/internal/loopcheck"
	"github.com/allocd/allocd/internal/wasmbuild"
)

func TestMain(m *testing.M) {
	code := m.Run()
	wasmbuild.Cleanup()
	os.Exit(code)
}

// section frames a section body with its id and size (bodies here are under 128 bytes).
func section(id byte, body ...byte) []byte { return append([]byte{id, byte(len(body))}, body...) }

// spin is a hand-assembled module: it imports wasi_snapshot_preview1.sched_yield, and exports
// (func "spin" (param i32) (result i32)) whose loop counts its parameter down to zero, or runs
// forever when given a negative number.
var spin = func() []byte {
	m := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	m = append(m, section(1, 0x02, 0x60, 0x01, 0x7f, 0x01, 0x7f, 0x60, 0x00, 0x01, 0x7f)...) // (i32)->i32, ()->i32
	imp := []byte{0x01, 22}
	imp = append(imp, "wasi_snapshot_preview1"...)
	imp = append(imp, 11)
	imp = append(imp, "sched_yield"...)
	imp = append(imp, 0x00, 0x01) // func of type 1
	m = append(m, section(2, imp...)...)
	m = append(m, section(3, 0x01, 0x00)...)                                 // function 1 has type 0
	m = append(m, section(7, 0x01, 0x04, 's', 'p', 'i', 'n', 0x00, 0x01)...) // export "spin" = func 1
	body := []byte{0x00,                                                     // no locals
		0x03, 0x40, // loop
		0x20, 0x00, 0x41, 0x01, 0x6b, 0x22, 0x00, // local.get 0; i32.const 1; i32.sub; local.tee 0
		0x41, 0x00, 0x47, 0x0d, 0x00, // i32.const 0; i32.ne; br_if 0
		0x0b,       // end loop
		0x20, 0x00, // local.get 0
		0x0b, // end
	}
	return append(m, section(10, append([]byte{0x01, byte(len(body))}, body...)...)...)
}()

// instantiate runs wasm with a sched_yield that counts its calls and traps once stop is set.
func instantiate(t *testing.T, wasm []byte, yields *atomic.Int64, stop *atomic.Bool) (api.Module, func()) {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	_, err := rt.NewHostModuleBuilder("wasi_snapshot_preview1").NewFunctionBuilder().
		WithFunc(func() int32 {
			yields.Add(1)
			if stop.Load() {
				panic(errors.New("stopped"))
			}
			return 0
		}).Export("sched_yield").Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := rt.Instantiate(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	return mod, func() { rt.Close(ctx) }
}

func TestYieldEveryPeriodAndStop(t *testing.T) {
	out, err := loopcheck.Instrument(spin)
	if err != nil {
		t.Fatal(err)
	}
	var yields atomic.Int64
	var stop atomic.Bool
	mod, done := instantiate(t, out, &yields, &stop)
	defer done()
	fn := mod.ExportedFunction("spin")
	res, err := fn.Call(context.Background(), 10*loopcheck.Period)
	if err != nil || res[0] != 0 {
		t.Fatalf("spin(%d) = %v, %v; want 0", 10*loopcheck.Period, res, err)
	}
	if got := yields.Load(); got != 10 {
		t.Fatalf("%d loop heads made %d calls into the host, want 10", 10*loopcheck.Period, got)
	}
	timer := time.AfterFunc(50*time.Millisecond, func() { stop.Store(true) })
	defer timer.Stop()
	_, err = fn.Call(context.Background(), api.EncodeI32(-1))
	if err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Fatalf("endless loop returned %v, want the host's stop", err)
	}
}

// TestEndlessLoopDoesNotBlockTheCollector: compiled wasm cannot be preempted by Go, so a guest
// that never left it would stall every stop-the-world. The periodic call into the host is what
// lets runtime.GC finish while a guest loops.
func TestEndlessLoopDoesNotBlockTheCollector(t *testing.T) {
	out, err := loopcheck.Instrument(spin)
	if err != nil {
		t.Fatal(err)
	}
	var yields atomic.Int64
	var stop atomic.Bool
	mod, done := instantiate(t, out, &yields, &stop)
	defer done()
	errc := make(chan error, 1)
	go func() {
		_, err := mod.ExportedFunction("spin").Call(context.Background(), api.EncodeI32(-1))
		errc <- err
	}()
	for yields.Load() == 0 {
		runtime.Gosched()
	}
	gcDone := make(chan struct{})
	go func() { runtime.GC(); runtime.GC(); close(gcDone) }()
	select {
	case <-gcDone:
	case <-time.After(30 * time.Second):
		t.Fatal("runtime.GC blocked by a looping guest")
	}
	stop.Store(true)
	if err := <-errc; err == nil {
		t.Fatal("loop did not stop")
	}
}

func TestGoModulesStillWork(t *testing.T) {
	for _, pkg := range []string{"host/testdata/plugins/noop", "plugins/averagely/wasm", "plugins/hash/wasm"} {
		t.Run(pkg, func(t *testing.T) {
			in := wasmbuild.Bytes(t, pkg)
			out, err := loopcheck.Instrument(in)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(in, wasmbuild.Bytes(t, pkg)) {
				t.Fatal("Instrument modified its input")
			}
			ctx := context.Background()
			rt := wazero.NewRuntime(ctx)
			defer rt.Close(ctx)
			cm, err := rt.CompileModule(ctx, out)
			if err != nil {
				t.Fatalf("instrumented module does not compile: %v", err)
			}
			if _, ok := cm.ExportedFunctions()["allocate"]; !ok {
				t.Fatal("allocate export lost")
			}
			if _, err := loopcheck.Instrument(out); !errors.Is(err, loopcheck.ErrUnsupported) {
				t.Fatalf("instrumenting twice: %v, want ErrUnsupported", err)
			}
		})
	}
}

func TestRefusesWhatItCannotRead(t *testing.T) {
	simd := bytes.Clone(spin)
	simd[len(simd)-4] = 0xFD // an instruction from the SIMD proposal
	noYield := bytes.Replace(spin, []byte("sched_yield"), []byte("sched_yiele"), 1)
	for name, in := range map[string][]byte{
		"empty": nil, "not wasm": []byte("hello, world"), "truncated": spin[:30], "simd": simd, "no sched_yield": noYield,
	} {
		if _, err := loopcheck.Instrument(in); !errors.Is(err, loopcheck.ErrUnsupported) && !errors.Is(err, loopcheck.ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrUnsupported or ErrMalformed", name, err)
		}
	}
}

// allocated returns the bytes allocated by f (runtime.MemStats.TotalAlloc, the whole process).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// allocBound is what Instrument may allocate for n bytes of input: a few copies of a module
// grown by at most a half, plus a little for headers and small tables.
func allocBound(n int) uint64 { return uint64(8*n) + 256<<10 }

// A module of zero-length sections (a file of zeros after the header) once cost 100 bytes of
// memory per byte of input, a section record per two bytes: it must be refused at the limit,
// quickly and cheaply, as malformed.
func TestZeroLengthSectionsRefusedCheaply(t *testing.T) {
	in := append([]byte("\x00asm\x01\x00\x00\x00"), make([]byte, 8<<20)...)
	var err error
	start := time.Now()
	got := allocated(func() { _, err = loopcheck.Instrument(in) })
	if !errors.Is(err, loopcheck.ErrMalformed) || !strings.Contains(err.Error(), "sections") {
		t.Fatalf("err = %v, want ErrMalformed naming the section limit", err)
	}
	if got > allocBound(len(in)) {
		t.Errorf("allocated %d bytes for %d bytes of input, more than %d", got, len(in), allocBound(len(in)))
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("refusing took %v", d)
	}
}

// Loops are where the rewriter adds code; a module that is nothing but loop heads must not make
// it grow the module tenfold: it is refused as unsupported (the host then runs it under wazero's
// own checks) once the growth passes the bound.
func TestLoopFloodBounded(t *testing.T) {
	body := []byte{0x00}
	for len(body) < 1<<20 {
		body = append(body, 0x03, 0x40) // loop
	}
	flood := bytes.Clone(spin[:bytes.LastIndex(spin, []byte{10})]) // spin without its code section
	code := appendLEB(nil, 1)
	code = appendLEB(code, uint32(len(body)))
	code = append(code, body...)
	flood = append(flood, 10)
	flood = appendLEB(flood, uint32(len(code)))
	flood = append(flood, code...)
	var err error
	got := allocated(func() { _, err = loopcheck.Instrument(flood) })
	if !errors.Is(err, loopcheck.ErrUnsupported) {
		t.Fatalf("err = %v, want ErrUnsupported", err)
	}
	if got > allocBound(len(flood)) {
		t.Errorf("allocated %d bytes for %d bytes of input, more than %d", got, len(flood), allocBound(len(flood)))
	}
}

func appendLEB(b []byte, v uint32) []byte {
	for ; v >= 0x80; v >>= 7 {
		b = append(b, byte(v)|0x80)
	}
	return append(b, byte(v))
}

func TestMalformedSections(t *testing.T) {
	hdr := []byte("\x00asm\x01\x00\x00\x00")
	for name, in := range map[string][]byte{
		"custom section without a name": append(bytes.Clone(hdr), 0x00, 0x00),
		"section past the end":          append(bytes.Clone(hdr), 0x01, 0x05, 0x00),
		"two type sections":             append(append(bytes.Clone(hdr), section(1, 0x00)...), section(1, 0x00)...),
		"sections out of order":         append(append(bytes.Clone(hdr), section(3, 0x00)...), section(1, 0x00)...),
	} {
		if _, err := loopcheck.Instrument(in); !errors.Is(err, loopcheck.ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
}

// FuzzInstrument checks that any input gives a module or an error, never a panic, and that the
// memory spent is bounded by the input's size (allocBound).
func FuzzInstrument(f *testing.F) {
	f.Add(spin)
	f.Add(spin[:20])
	f.Add(append([]byte("\x00asm\x01\x00\x00\x00"), make([]byte, 4096)...))
	f.Add(append(bytes.Clone(spin), 0x00, 0x02, 0x01, 'x'))
	f.Fuzz(func(t *testing.T, in []byte) {
		var out []byte
		var err error
		got := allocated(func() { out, err = loopcheck.Instrument(in) })
		if got > allocBound(len(in)) {
			t.Fatalf("allocated %d bytes for %d bytes of input, more than %d", got, len(in), allocBound(len(in)))
		}
		if err != nil {
			if !errors.Is(err, loopcheck.ErrUnsupported) && !errors.Is(err, loopcheck.ErrMalformed) {
				t.Fatalf("error %v is neither ErrUnsupported nor ErrMalformed", err)
			}
			return
		}
		if len(out) <= len(in) {
			t.Fatalf("output of %d bytes for %d bytes of input", len(out), len(in))
		}
	})
}
