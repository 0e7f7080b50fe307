package host

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MaxErrorStderr caps the guest stderr an Error's message carries (its head; the length cut is
// said), so that logs and API answers stay readable when a Go guest dumps its goroutines.
const MaxErrorStderr = 1024

// Kind classifies a plugin failure.
type Kind string

// The kinds of Error.
const (
	// KindLoad: the module could not be compiled, linked or checked.
	KindLoad Kind = "load"
	// KindTrap: the guest trapped (a Go panic, an out-of-memory, unreachable code).
	KindTrap Kind = "trap"
	// KindTimeout: the call ran past its deadline and was stopped. Its error matches
	// context.DeadlineExceeded (errors.Is), as does a load whose _initialize ran out of time.
	KindTimeout Kind = "timeout"
	// KindCanceled: the caller gave up before the call ended.
	KindCanceled Kind = "canceled"
	// KindFailed: the plugin returned a failure for the whole call.
	KindFailed Kind = "failed"
	// KindInvalid: the plugin answered, but the answer broke the ABI (malformed, an index out of
	// range, a queue given to two consumers, too large).
	KindInvalid Kind = "invalid"
	// KindClosed: the plugin was closed.
	KindClosed Kind = "closed"
)

// Error is a failure of one plugin, naming the plugin and the cause.
type Error struct {
	Plugin string
	Kind   Kind
	Err    error
	// Stderr is what the guest wrote to its standard error before the failure (where a Go
	// panic writes its message): its first MaxErrorStderr bytes, with a note of how much was
	// cut.
	Stderr string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("plugin ")
	b.WriteString(strconv.Quote(e.Plugin))
	b.WriteString(": ")
	b.WriteString(string(e.Kind))
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if s := strings.TrimSpace(e.Stderr); s != "" {
		b.WriteString("; guest stderr: ")
		b.WriteString(s)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// IsKind reports whether err is a plugin Error of kind k.
func IsKind(err error, k Kind) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == k
}

// deadlineError is a guest stopped at the host's call deadline. It matches
// context.DeadlineExceeded, so that a caller tells a failure of time, which a less loaded machine
// may not repeat, from a failure of the plugin's code: errors.Is(err, context.DeadlineExceeded).
type deadlineError struct {
	what string // "stopped after the", "_initialize ended at its"
	d    time.Duration
}

func (e *deadlineError) Error() string { return fmt.Sprintf("%s %v deadline", e.what, e.d) }

func (e *deadlineError) Is(target error) bool { return target == context.DeadlineExceeded }
