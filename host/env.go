package host

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/rs/zerolog"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// The two host modules a plugin may import besides WASI.
const (
	ExtismModule = "extism:host/env"
	AllocdModule = "allocd:host/v1"
)

type hostFunc struct {
	module, name    string
	params, results []api.ValueType
	fn              func(in *instance, m api.Module, stack []uint64)
}

// provided maps "module.name" to the signature the host implements, for checkModule.
var provided = map[string]hostFunc{}

func init() {
	for _, f := range hostFuncs {
		provided[f.module+"."+f.name] = f
	}
}

type instKey struct{}

func instantiateImports(ctx context.Context, rt wazero.Runtime) error {
	for _, module := range []string{ExtismModule, AllocdModule} {
		b := rt.NewHostModuleBuilder(module)
		for _, f := range hostFuncs {
			if f.module != module {
				continue
			}
			fn := f.fn
			b.NewFunctionBuilder().
				WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, m api.Module, stack []uint64) {
					fn(ctx.Value(instKey{}).(*instance), m, stack)
				}), f.params, f.results).
				Export(f.name)
		}
		if _, err := b.Instantiate(ctx); err != nil {
			return fmt.Errorf("host: instantiate %s: %w", module, err)
		}
	}
	return nil
}

// trap stops the guest's call with an error the caller sees.
func trap(format string, args ...any) { panic(fmt.Errorf(format, args...)) }

func logFunc(level zerolog.Level) func(in *instance, m api.Module, stack []uint64) {
	return func(in *instance, _ api.Module, stack []uint64) {
		in.logMessage(level, in.block(stack[0], "log"))
	}
}

var hostFuncs = []hostFunc{
	// Extism host memory, a per-instance arena (see instance.alloc).
	{ExtismModule, "alloc", []api.ValueType{i64}, []api.ValueType{i64}, func(in *instance, _ api.Module, s []uint64) {
		s[0] = in.alloc(s[0])
	}},
	{ExtismModule, "free", []api.ValueType{i64}, nil, func(*instance, api.Module, []uint64) {
		// Blocks live until the arena is reset before the next call.
	}},
	{ExtismModule, "length", []api.ValueType{i64}, []api.ValueType{i64}, func(in *instance, _ api.Module, s []uint64) {
		s[0] = in.length(s[0])
	}},
	{ExtismModule, "length_unsafe", []api.ValueType{i64}, []api.ValueType{i64}, func(in *instance, _ api.Module, s []uint64) {
		s[0] = in.length(s[0])
	}},
	{ExtismModule, "load_u8", []api.ValueType{i64}, []api.ValueType{i32}, func(in *instance, _ api.Module, s []uint64) {
		s[0] = uint64(in.arenaRange(s[0], 1, "load_u8")[0])
	}},
	{ExtismModule, "load_u64", []api.ValueType{i64}, []api.ValueType{i64}, func(in *instance, _ api.Module, s []uint64) {
		s[0] = binary.LittleEndian.Uint64(in.arenaRange(s[0], 8, "load_u64"))
	}},
	{ExtismModule, "store_u8", []api.ValueType{i64, i32}, nil, func(in *instance, _ api.Module, s []uint64) {
		in.arenaRange(s[0], 1, "store_u8")[0] = byte(s[1])
	}},
	{ExtismModule, "store_u64", []api.ValueType{i64, i64}, nil, func(in *instance, _ api.Module, s []uint64) {
		binary.LittleEndian.PutUint64(in.arenaRange(s[0], 8, "store_u64"), s[1])
	}},
	{ExtismModule, "input_length", nil, []api.ValueType{i64}, func(in *instance, _ api.Module, s []uint64) {
		s[0] = uint64(len(in.input))
	}},
	{ExtismModule, "input_load_u8", []api.ValueType{i64}, []api.ValueType{i32}, func(in *instance, _ api.Module, s []uint64) {
		s[0] = uint64(in.inputRange(s[0], 1)[0])
	}},
	{ExtismModule, "input_load_u64", []api.ValueType{i64}, []api.ValueType{i64}, func(in *instance, _ api.Module, s []uint64) {
		s[0] = binary.LittleEndian.Uint64(in.inputRange(s[0], 8))
	}},
	{ExtismModule, "output_set", []api.ValueType{i64, i64}, nil, func(in *instance, _ api.Module, s []uint64) {
		if s[1] > uint64(in.p.rt.cfg.MaxOutput) {
			trap("output of %d bytes exceeds the %d-byte limit", s[1], in.p.rt.cfg.MaxOutput)
		}
		in.setOutput(in.arenaRange(s[0], s[1], "output_set"))
	}},
	{ExtismModule, "error_set", []api.ValueType{i64}, nil, func(in *instance, _ api.Module, s []uint64) {
		if s[0] == 0 {
			in.errSet, in.errMsg = false, ""
			return
		}
		in.setError(in.block(s[0], "error_set"))
	}},
	{ExtismModule, "config_get", []api.ValueType{i64}, []api.ValueType{i64}, func(in *instance, _ api.Module, s []uint64) {
		v, ok := in.config[string(in.block(s[0], "config_get"))]
		if !ok {
			s[0] = 0
			return
		}
		s[0] = in.allocBytes(v)
	}},
	{ExtismModule, "var_get", []api.ValueType{i64}, []api.ValueType{i64}, func(in *instance, _ api.Module, s []uint64) {
		v, ok := in.vars[string(in.block(s[0], "var_get"))]
		if !ok {
			s[0] = 0
			return
		}
		s[0] = in.allocBytes(string(v))
	}},
	{ExtismModule, "var_set", []api.ValueType{i64, i64}, nil, func(in *instance, _ api.Module, s []uint64) {
		in.setVar(string(in.block(s[0], "var_set")), s[1])
	}},
	{ExtismModule, "log_trace", []api.ValueType{i64}, nil, logFunc(zerolog.TraceLevel)},
	{ExtismModule, "log_debug", []api.ValueType{i64}, nil, logFunc(zerolog.DebugLevel)},
	{ExtismModule, "log_info", []api.ValueType{i64}, nil, logFunc(zerolog.InfoLevel)},
	{ExtismModule, "log_warn", []api.ValueType{i64}, nil, logFunc(zerolog.WarnLevel)},
	{ExtismModule, "log_error", []api.ValueType{i64}, nil, logFunc(zerolog.ErrorLevel)},
	{ExtismModule, "get_log_level", nil, []api.ValueType{i32}, func(in *instance, _ api.Module, s []uint64) {
		s[0] = uint64(uint32(extismLevel(in.p.log.GetLevel())))
	}},
	// No network: a plugin's answer must depend on its request alone.
	{ExtismModule, "http_request", []api.ValueType{i64, i64}, []api.ValueType{i64}, func(in *instance, _ api.Module, s []uint64) {
		in.p.log.Debug().Msg("http_request refused: plugins have no network")
		s[0] = 0
	}},
	{ExtismModule, "http_status_code", nil, []api.ValueType{i32}, func(_ *instance, _ api.Module, s []uint64) { s[0] = 0 }},
	{ExtismModule, "http_headers", nil, []api.ValueType{i64}, func(_ *instance, _ api.Module, s []uint64) { s[0] = 0 }},

	// allocd's bulk transfer: one host call moves a whole buffer.
	{AllocdModule, "input_read", []api.ValueType{i32, i32}, []api.ValueType{i32}, func(in *instance, m api.Module, s []uint64) {
		ptr, limit := uint32(s[0]), uint32(s[1])
		if uint64(len(in.input)) <= uint64(limit) && !m.Memory().Write(ptr, in.input) {
			trap("input_read: [%d,%d) is outside guest memory", ptr, uint64(ptr)+uint64(len(in.input)))
		}
		s[0] = uint64(len(in.input))
	}},
	{AllocdModule, "output_write", []api.ValueType{i32, i32}, nil, func(in *instance, m api.Module, s []uint64) {
		if uint32(s[1]) > uint32(in.p.rt.cfg.MaxOutput) {
			trap("output of %d bytes exceeds the %d-byte limit", uint32(s[1]), in.p.rt.cfg.MaxOutput)
		}
		in.setOutput(guestRange(m, s[0], s[1], "output_write"))
	}},
	{AllocdModule, "error_write", []api.ValueType{i32, i32}, nil, func(in *instance, m api.Module, s []uint64) {
		in.setError(guestRange(m, s[0], s[1], "error_write"))
	}},
	{AllocdModule, "log_write", []api.ValueType{i32, i32, i32}, nil, func(in *instance, m api.Module, s []uint64) {
		in.logMessage(zerologLevel(int32(s[0])), guestRange(m, s[1], s[2], "log_write"))
	}},
}

func guestRange(m api.Module, ptr, n uint64, what string) []byte {
	b, ok := m.Memory().Read(uint32(ptr), uint32(n))
	if !ok {
		trap("%s: [%d,%d) is outside guest memory of %d bytes", what, uint32(ptr), uint64(uint32(ptr))+uint64(uint32(n)), m.Memory().Size())
	}
	return b
}

// extismLevel maps zerolog's level to Extism's numbering (0 trace .. 4 error); a level with
// logging off answers MaxInt32 so that go-pdk skips sending disabled messages.
func extismLevel(l zerolog.Level) int32 {
	switch l {
	case zerolog.TraceLevel:
		return 0
	case zerolog.DebugLevel:
		return 1
	case zerolog.InfoLevel:
		return 2
	case zerolog.WarnLevel:
		return 3
	case zerolog.ErrorLevel:
		return 4
	}
	return math.MaxInt32
}

func zerologLevel(l int32) zerolog.Level {
	switch l {
	case 0:
		return zerolog.TraceLevel
	case 1:
		return zerolog.DebugLevel
	case 2:
		return zerolog.InfoLevel
	case 3:
		return zerolog.WarnLevel
	}
	return zerolog.ErrorLevel
}
