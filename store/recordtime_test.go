package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/allocd/allocd/store"
)

// RecordTime reads a record's top-level "at", wherever it is, and names what is missing.
func TestRecordTime(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	big := strings.Repeat(`{"at":"1999-01-01T00:00:00Z"},`, 1000)
	for _, rec := range []string{
		`{"at":"2026-01-01T00:00:00Z","moves":[` + big + `{}]}`,
		`{"group":"g","moves":[` + big + `{}],"nested":{"at":"1999-01-01T00:00:00Z"},"at":"2026-01-01T00:00:00Z"}`,
	} {
		got, err := store.RecordTime([]byte(rec))
		if err != nil || !got.Equal(at) {
			t.Errorf("RecordTime = %v, %v; want %v", got, err, at)
		}
	}
	for rec, want := range map[string]string{
		`{"group":"g"}`: `no "at"`,
		`[1,2]`:         "not a JSON object",
		`{"at":12}`:     "not a JSON string",
		`{"group":`:     "EOF",
	} {
		if _, err := store.RecordTime([]byte(rec)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("RecordTime(%s) = %v, want an error with %q", rec, err, want)
		}
	}
}
