// Package loopcheck rewrites a WebAssembly module so that a host can stop it cheaply and the Go
// scheduler can always reach it: it adds a mutable i32 global, a countdown, and at the head of
// every loop code that decrements it and, every Period loop heads, calls the module's own
// wasi_snapshot_preview1.sched_yield import and restarts the count. The host's sched_yield
// (wazero's WithOsyield) is where it stops a runaway call: it traps when the call's deadline has
// passed or its caller gave up.
//
// Why not wazero's WithCloseOnContextDone? It calls out of the compiled code into Go at every
// loop head, and the Go compiler's wasm output sends every jump between basic blocks through the
// loop head of its function, so every taken branch pays that trip: the built-in plugins ran 3-6x
// slower (BENCHMARKS.md). Why not a flag checked inline with no call out? Compiled wasm code is
// not preemptible by Go: a guest looping forever without leaving it would block every
// stop-the-world, the garbage collector's included, and so the whole process; the periodic call
// into Go is what lets the scheduler in.
//
// The rewriter decodes instructions only far enough to find loops: it knows the immediates of
// the core instruction set, sign extension, saturating truncation, bulk memory, reference types
// and tail calls. A module using anything else (SIMD, threads, exceptions, GC), or one that does
// not import sched_yield, is refused with ErrUnsupported, and the host falls back to wazero's own
// checks for it.
package loopcheck

import (
	"bytes"
	"errors"
	"fmt"
)

// Global is the name under which the countdown global is exported (so a module is never
// instrumented twice, and tests can watch it).
const Global = "allocd_loopcheck"

// Period is the number of loop heads between two calls into the host: small enough that a stop
// or a garbage collection waits microseconds, large enough that the call costs well under 1%.
const Period = 4096

// ErrUnsupported reports a module this package cannot instrument.
var ErrUnsupported = errors.New("loopcheck: unsupported")

// ErrMalformed reports a module whose section layout breaks the binary format (a section past
// the end, a custom section with no name, a known section twice or out of order) or that has
// more than MaxSections sections: no runtime would accept it, so there is nothing to fall back to.
var ErrMalformed = errors.New("malformed module")

// MaxSections is the most sections a module may have. A module has at most 13 known sections;
// the rest are custom sections (names, producers, debug information: a few dozen for a Rust
// module with DWARF, a handful for Go). The limit keeps the section table small whatever the
// input: a file of zeros is a zero-length section every two bytes.
const MaxSections = 1024

// maxGrowth bounds the code the rewriter adds, as a fraction of the input: a real module grows
// by a few percent (a Go guest of 3 MB by ~2%), while one made of nothing but loop heads would
// grow elevenfold. Past it the module is refused as unsupported and runs under wazero's checks.
const maxGrowth = 2 // output at most len(module) + len(module)/maxGrowth + growthSlack
const growthSlack = 64 << 10

const (
	secCustom = 0
	secType   = 1
	secImport = 2
	secGlobal = 6
	secExport = 7
	secCode   = 10
)

// sectionOrder is the position of each known section id in a module, for inserting a section.
var sectionOrder = map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}

type section struct {
	id   byte
	body []byte
}

// Instrument returns the rewritten module. It does not modify module.
func Instrument(module []byte) ([]byte, error) {
	if len(module) < 8 || !bytes.Equal(module[:4], []byte("\x00asm")) || !bytes.Equal(module[4:8], []byte{1, 0, 0, 0}) {
		return nil, fmt.Errorf("%w: not a core WebAssembly module, version 1", ErrUnsupported)
	}
	secs, err := readSections(module)
	if err != nil {
		return nil, err
	}

	importedGlobals, definedGlobals := uint32(0), uint32(0)
	var types [][]byte
	yield := int64(-1)
	for _, s := range secs {
		switch s.id {
		case secType:
			t, err := readTypes(s.body)
			if err != nil {
				return nil, err
			}
			types = t
		case secImport:
			g, f, err := readImports(s.body, types)
			if err != nil {
				return nil, err
			}
			importedGlobals, yield = g, f
		case secGlobal:
			r := reader{b: s.body}
			definedGlobals = r.u32()
			if r.err != nil {
				return nil, r.err
			}
		case secExport:
			if err := checkExports(s.body); err != nil {
				return nil, err
			}
		}
	}
	if yield < 0 {
		return nil, fmt.Errorf("%w: module does not import wasi_snapshot_preview1.sched_yield () -> i32", ErrUnsupported)
	}
	gidx := importedGlobals + definedGlobals

	out := make([]section, 0, len(secs)+2)
	added := map[byte]bool{}
	add := func(id byte, body []byte) {
		// Insert a missing section before the first known section that comes after it.
		for i, s := range out {
			if s.id != secCustom && sectionOrder[s.id] > sectionOrder[id] {
				out = append(out[:i], append([]section{{id, body}}, out[i:]...)...)
				return
			}
		}
		out = append(out, section{id, body})
	}
	for _, s := range secs {
		switch s.id {
		case secGlobal:
			s.body = appendToVector(s.body, counterGlobal())
			added[secGlobal] = true
		case secExport:
			s.body = appendToVector(s.body, exportEntry(gidx))
			added[secExport] = true
		case secCode:
			limit := len(s.body) + len(module)/maxGrowth + growthSlack
			body, err := instrumentCode(s.body, gidx, uint32(yield), limit)
			if err != nil {
				return nil, err
			}
			s.body = body
			added[secCode] = true
		}
		out = append(out, s)
	}
	if !added[secCode] {
		return nil, fmt.Errorf("%w: module has no code", ErrUnsupported)
	}
	if !added[secGlobal] {
		add(secGlobal, append([]byte{1}, counterGlobal()...))
	}
	if !added[secExport] {
		add(secExport, append([]byte{1}, exportEntry(gidx)...))
	}

	res := append(make([]byte, 0, len(module)+len(module)/16), module[:8]...)
	for _, s := range out {
		res = append(res, s.id)
		res = appendU32(res, uint32(len(s.body)))
		res = append(res, s.body...)
	}
	return res, nil
}

// readSections splits a module into its sections, checking the layout the binary format demands
// of them, with no more than MaxSections entries.
func readSections(module []byte) ([]section, error) {
	// Count first, so the table is allocated once and never past the limit.
	n := 0
	for r := (reader{b: module, off: 8}); r.off < len(r.b); n++ {
		if n == MaxSections {
			return nil, fmt.Errorf("%w: more than %d sections", ErrMalformed, MaxSections)
		}
		r.byte()
		size := r.u32()
		start := r.off
		r.bytes(int(size))
		if r.err != nil {
			return nil, fmt.Errorf("%w: section %d at byte %d runs past the end of the module", ErrMalformed, n, start)
		}
	}
	secs := make([]section, 0, n)
	last := 0
	for r := (reader{b: module, off: 8}); r.off < len(r.b); {
		at := r.off
		id := r.byte()
		body := r.bytes(int(r.u32()))
		if id == secCustom {
			if len(body) == 0 {
				return nil, fmt.Errorf("%w: custom section at byte %d has no name", ErrMalformed, at)
			}
		} else {
			pos, ok := sectionOrder[id]
			switch {
			case !ok:
				return nil, fmt.Errorf("%w: unknown section id %d at byte %d", ErrMalformed, id, at)
			case pos <= last:
				return nil, fmt.Errorf("%w: section id %d at byte %d is repeated or out of order", ErrMalformed, id, at)
			}
			last = pos
		}
		secs = append(secs, section{id, body})
	}
	return secs, nil
}

func exportEntry(gidx uint32) []byte {
	e := appendU32(nil, uint32(len(Global)))
	e = append(e, Global...)
	e = append(e, 0x03) // global
	return appendU32(e, gidx)
}

// appendToVector adds one entry to a section that is a vector: its count goes up by one.
func appendToVector(body, entry []byte) []byte {
	r := reader{b: body}
	n := r.u32()
	out := appendU32(nil, n+1)
	out = append(out, body[r.off:]...)
	return append(out, entry...)
}

// counterGlobal is the countdown's definition: a mutable i32 starting at Period.
func counterGlobal() []byte {
	g := []byte{0x7F, 0x01, 0x41}
	g = appendS32(g, Period)
	return append(g, 0x0B)
}

// readTypes returns each function type of the type section, as its raw bytes after 0x60.
func readTypes(body []byte) ([][]byte, error) {
	r := reader{b: body}
	n := r.u32()
	var types [][]byte
	for i := uint32(0); i < n && r.err == nil; i++ {
		if r.byte() != 0x60 {
			return nil, fmt.Errorf("%w: type %d is not a function type", ErrUnsupported, i)
		}
		start := r.off
		for k := 0; k < 2; k++ { // params, results
			for m := r.u32(); m > 0 && r.err == nil; m-- {
				r.byte()
			}
		}
		types = append(types, body[start:r.off])
	}
	return types, r.err
}

// readImports counts the imported globals and finds the function index of an imported
// wasi_snapshot_preview1.sched_yield of type () -> i32 (-1 when there is none).
func readImports(body []byte, types [][]byte) (globals uint32, yield int64, err error) {
	r := reader{b: body}
	n := r.u32()
	yield = -1
	funcs := int64(0)
	for i := uint32(0); i < n && r.err == nil; i++ {
		module := string(r.bytes(int(r.u32())))
		name := string(r.bytes(int(r.u32())))
		switch kind := r.byte(); kind {
		case 0x00: // func
			t := r.u32()
			if module == "wasi_snapshot_preview1" && name == "sched_yield" && int(t) < len(types) && bytes.Equal(types[t], []byte{0x00, 0x01, 0x7F}) {
				yield = funcs
			}
			funcs++
		case 0x01: // table
			r.byte()
			r.limits()
		case 0x02: // memory
			r.limits()
		case 0x03: // global
			r.byte()
			r.byte()
			globals++
		case 0x04: // tag
			r.byte()
			r.u32()
		default:
			return 0, -1, fmt.Errorf("%w: import kind %#x", ErrUnsupported, kind)
		}
	}
	return globals, yield, r.err
}

func checkExports(body []byte) error {
	r := reader{b: body}
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		name := r.bytes(int(r.u32()))
		r.byte()
		r.u32()
		if string(name) == Global {
			return fmt.Errorf("%w: module already exports %q", ErrUnsupported, Global)
		}
	}
	return r.err
}

// instrumentCode rewrites the code section; an output longer than limit bytes is refused.
func instrumentCode(body []byte, gidx, yield uint32, limit int) ([]byte, error) {
	// At every loop head:
	//	global.get g; i32.const 1; i32.sub; global.set g
	//	global.get g; i32.eqz; if; call sched_yield; drop; i32.const Period; global.set g; end
	g := appendU32(nil, gidx)
	check := append(append([]byte{0x23}, g...), 0x41, 0x01, 0x6B, 0x24)
	check = append(append(check, g...), 0x23)
	check = append(append(check, g...), 0x45, 0x04, 0x40, 0x10)
	check = append(appendU32(check, yield), 0x1A, 0x41)
	check = append(appendS32(check, Period), 0x24)
	check = append(append(check, g...), 0x0B)

	r := reader{b: body}
	n := r.u32()
	out := appendU32(make([]byte, 0, min(len(body)+len(body)/8, limit)), n)
	var fn []byte
	for i := uint32(0); i < n; i++ {
		size := r.u32()
		code := r.bytes(int(size))
		if r.err != nil {
			return nil, r.err
		}
		var err error
		fn, err = instrumentFunc(fn[:0], code, check, limit-len(out))
		if err != nil {
			return nil, fmt.Errorf("function body %d: %w", i, err)
		}
		if len(out)+len(fn)+5 > limit {
			return nil, fmt.Errorf("%w: instrumenting would grow the code past %d bytes (too many loops)", ErrUnsupported, limit)
		}
		out = appendU32(out, uint32(len(fn)))
		out = append(out, fn...)
	}
	if r.off != len(body) {
		return nil, fmt.Errorf("%w: %d bytes after the last function body", ErrUnsupported, len(body)-r.off)
	}
	return out, nil
}

// instrumentFunc copies one function body to out, adding check after every loop instruction;
// an output longer than limit is refused.
func instrumentFunc(out, code, check []byte, limit int) ([]byte, error) {
	r := reader{b: code}
	groups := r.u32()
	for i := uint32(0); i < groups; i++ {
		r.u32()
		r.byte()
	}
	if r.err != nil {
		return nil, r.err
	}
	copied := 0
	for r.off < len(code) {
		op := r.byte()
		switch {
		case op == 0x03: // loop
			r.blockType()
			need := len(out) + r.off - copied + len(check)
			if need > limit {
				return nil, fmt.Errorf("%w: instrumenting would grow the code past %d bytes (too many loops)", ErrUnsupported, limit)
			}
			if need > cap(out) {
				// Double, rather than append's 1.25x for large slices: fewer copies.
				out = append(make([]byte, 0, min(max(2*cap(out), need, len(code)+len(code)/8), limit)), out...)
			}
			out = append(out, code[copied:r.off]...)
			out = append(out, check...)
			copied = r.off
		case op == 0x02 || op == 0x04: // block, if
			r.blockType()
		case op <= 0x01, op == 0x05, op == 0x0B, op == 0x0F, op == 0x1A, op == 0x1B, op == 0xD1:
		case op == 0x0C || op == 0x0D, op == 0x10, op == 0x12, op == 0x14, op == 0x15,
			op >= 0x20 && op <= 0x26, op == 0xD2:
			r.u32()
		case op == 0x0E: // br_table
			for n := r.u32(); n > 0 && r.err == nil; n-- {
				r.u32()
			}
			r.u32()
		case op == 0x11 || op == 0x13: // call_indirect, return_call_indirect
			r.u32()
			r.u32()
		case op == 0x1C: // select t*
			for n := r.u32(); n > 0 && r.err == nil; n-- {
				r.byte()
			}
		case op >= 0x28 && op <= 0x3E: // loads and stores: memarg
			if align := r.u32(); align&0x40 != 0 {
				r.u32() // memory index (multi-memory)
			}
			r.u64()
		case op == 0x3F || op == 0x40: // memory.size, memory.grow
			r.u32()
		case op == 0x41:
			r.u64()
		case op == 0x42:
			r.u64()
		case op == 0x43:
			r.bytes(4)
		case op == 0x44:
			r.bytes(8)
		case op >= 0x45 && op <= 0xC4: // numeric, sign extension
		case op == 0xD0: // ref.null
			r.byte()
		case op == 0xFC:
			switch sub := r.u32(); {
			case sub <= 7:
			case sub == 8, sub == 10, sub == 12, sub == 14:
				r.u32()
				r.u32()
			case sub == 9, sub == 11, sub == 13, sub >= 15 && sub <= 17:
				r.u32()
			default:
				return nil, fmt.Errorf("%w: instruction 0xfc %d", ErrUnsupported, sub)
			}
		default:
			return nil, fmt.Errorf("%w: instruction %#x", ErrUnsupported, op)
		}
		if r.err != nil {
			return nil, r.err
		}
	}
	return append(out, code[copied:]...), nil
}

// reader decodes the binary format; the first error sticks and ends every read.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail() {
	if r.err == nil {
		r.err = fmt.Errorf("%w: truncated or malformed module at byte %d", ErrUnsupported, r.off)
	}
	r.off = len(r.b)
}

func (r *reader) byte() byte {
	if r.off >= len(r.b) {
		r.fail()
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

func (r *reader) bytes(n int) []byte {
	if n < 0 || n > len(r.b)-r.off {
		r.fail()
		return nil
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s
}

// u64 reads an unsigned or signed LEB128 of up to 10 bytes; loop finding needs only its length
// and, for counts, the value of small unsigned ones.
func (r *reader) u64() uint64 {
	var v uint64
	for shift := 0; shift < 70; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= uint64(c&0x7F) << shift
		if c&0x80 == 0 {
			return v
		}
	}
	r.fail()
	return 0
}

func (r *reader) u32() uint32 {
	v := r.u64()
	if v > 1<<32-1 {
		r.fail()
		return 0
	}
	return uint32(v)
}

func (r *reader) limits() {
	flags := r.byte()
	r.u64()
	if flags&1 != 0 {
		r.u64()
	}
}

// blockType skips a block type: 0x40, a one-byte value type, or a type index (s33).
func (r *reader) blockType() {
	if r.off >= len(r.b) {
		r.fail()
		return
	}
	switch c := r.b[r.off]; {
	case c == 0x40, c >= 0x6F && c <= 0x7F && c != 0x71 && c != 0x72:
		r.off++
	case c == 0x63 || c == 0x64: // (ref null? ht): GC proposal
		r.fail()
		r.err = fmt.Errorf("%w: typed reference block type", ErrUnsupported)
	default:
		r.u64()
	}
}

func appendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

// appendS32 appends v as a signed LEB128.
func appendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if v == 0 && c&0x40 == 0 || v == -1 && c&0x40 != 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
