package loopcheck_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
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

// A hand-assembled module: (func (export "spin") (param i32) (result i32) (loop ...)) that counts
// its parameter down to zero, or forever when given a negative number.
var spin = []byte{
	0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
	0x01, 0x06, 0x01, 0x60, 0x01, 0x7f, 0x01, 0x7f, // type: (i32) -> i32
	0x03, 0x02, 0x01, 0x00, // function 0 has type 0
	0x07, 0x08, 0x01, 0x04, 's', 'p', 'i', 'n', 0x00, 0x00, // export "spin" func 0
	0x0a, 0x15, 0x01, 0x13, 0x00, // code: 1 body of 19 bytes, no locals
	0x03, 0x40, // loop
	0x20, 0x00, 0x41, 0x01, 0x6b, 0x22, 0x00, // local.get 0; i32.const 1; i32.sub; local.tee 0
	0x41, 0x00, 0x47, 0x0d, 0x00, // i32.const 0; i32.ne; br_if 0
	0x0b,       // end loop
	0x20, 0x00, // local.get 0
	0x0b, // end
}

func instantiate(t *testing.T, wasm []byte) (api.Module, func()) {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	mod, err := rt.Instantiate(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	return mod, func() { rt.Close(ctx) }
}

func TestInterruptStopsALoop(t *testing.T) {
	out, err := loopcheck.Instrument(spin)
	if err != nil {
		t.Fatal(err)
	}
	mod, done := instantiate(t, out)
	defer done()
	fn := mod.ExportedFunction("spin")
	res, err := fn.Call(context.Background(), 5)
	if err != nil || res[0] != 0 {
		t.Fatalf("spin(5) = %v, %v; want 0", res, err)
	}
	g, ok := mod.ExportedGlobal(loopcheck.Global).(api.MutableGlobal)
	if !ok {
		t.Fatalf("no mutable global %q exported", loopcheck.Global)
	}
	timer := time.AfterFunc(50*time.Millisecond, func() { g.Set(1) })
	defer timer.Stop()
	_, err = fn.Call(context.Background(), api.EncodeI32(-1))
	if err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("endless loop returned %v, want an unreachable trap", err)
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
	for name, in := range map[string][]byte{
		"empty": nil, "not wasm": []byte("hello, world"), "truncated": spin[:30], "simd": simd,
	} {
		if _, err := loopcheck.Instrument(in); !errors.Is(err, loopcheck.ErrUnsupported) {
			t.Errorf("%s: err = %v, want ErrUnsupported", name, err)
		}
	}
}

func FuzzInstrument(f *testing.F) {
	f.Add(spin)
	f.Add(spin[:20])
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := loopcheck.Instrument(in)
		if err != nil {
			if !errors.Is(err, loopcheck.ErrUnsupported) {
				t.Fatalf("error %v is not ErrUnsupported", err)
			}
			return
		}
		if len(out) <= len(in) {
			t.Fatalf("output of %d bytes for %d bytes of input", len(out), len(in))
		}
	})
}
