package coordinator

import (
	"errors"
	"fmt"
)

// Kind classifies an Error, so the HTTP layer can choose a status without parsing messages.
type Kind string

// The kinds of Error.
const (
	// KindInvalid: the request is malformed or breaks a rule (a bad name, a negative count).
	KindInvalid Kind = "invalid"
	// KindNotFound: the topic, group or member does not exist.
	KindNotFound Kind = "not found"
	// KindConflict: the request contradicts the current state (a fenced client id, a key
	// already held by another member).
	KindConflict Kind = "conflict"
	// KindStorage: the store refused a write; nothing changed.
	KindStorage Kind = "storage"
)

// Error is a refused request, saying what was wrong and with which value.
type Error struct {
	Kind Kind
	Msg  string
	Err  error // the cause, for KindStorage
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// KindOf returns err's Kind, or "" when err is not an *Error.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ""
}

func invalid(format string, args ...any) error {
	return &Error{Kind: KindInvalid, Msg: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &Error{Kind: KindNotFound, Msg: fmt.Sprintf(format, args...)}
}

func conflict(format string, args ...any) error {
	return &Error{Kind: KindConflict, Msg: fmt.Sprintf(format, args...)}
}

func storage(err error, format string, args ...any) error {
	return &Error{Kind: KindStorage, Msg: fmt.Sprintf(format, args...), Err: err}
}
