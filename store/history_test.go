package store_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/allocd/allocd/store"
)

func putRecord(t *testing.T, s *store.Bolt, topic string, n int64, at time.Time) {
	t.Helper()
	err := s.Update(func(tx store.Tx) error {
		return tx.Put(store.HistoryBucket, store.HistoryKey("g", topic, n), fmt.Appendf(nil, `{"generation":%d,"at":%q}`, n, at.Format(time.RFC3339Nano)))
	})
	if err != nil {
		t.Fatal(err)
	}
}

func numbers(t *testing.T, s *store.Bolt, topic string) []int64 {
	t.Helper()
	var out []int64
	err := s.View(func(tx store.Tx) error {
		return tx.List(store.HistoryBucket, store.HistoryPrefix("g", topic), func(key string, _ []byte) error {
			n, err := store.HistoryNumber(key)
			out = append(out, n)
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestTrimHistory(t *testing.T) {
	s := open(t, t.TempDir())
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// Numbers past 15 and 255 check that keys sort by number, not by text.
	for _, n := range []int64{1, 2, 16, 17, 256, 257} {
		putRecord(t, s, "T", n, now.Add(time.Duration(n)*time.Minute))
	}
	putRecord(t, s, "T2", 1, now) // another topic is left alone
	trim := func(r store.Retention, at time.Time) int {
		var n int
		if err := s.Update(func(tx store.Tx) (err error) {
			n, err = store.TrimHistory(tx, "g", "T", r, at, store.RecordTime)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := trim(store.Retention{Count: 4}, now); n != 2 || fmt.Sprint(numbers(t, s, "T")) != "[16 17 256 257]" {
		t.Fatalf("count trim dropped %d, left %v", n, numbers(t, s, "T"))
	}
	// Older than an hour at now+257min: 16 and 17 go; 256 and 257 are young enough.
	if n := trim(store.Retention{MaxAge: time.Hour}, now.Add(257*time.Minute)); n != 2 || fmt.Sprint(numbers(t, s, "T")) != "[256 257]" {
		t.Fatalf("age trim dropped %d, left %v", n, numbers(t, s, "T"))
	}
	// Everything old: the newest stays.
	if trim(store.Retention{MaxAge: time.Minute}, now.Add(24*time.Hour)); fmt.Sprint(numbers(t, s, "T")) != "[257]" {
		t.Fatalf("the newest record was trimmed: %v", numbers(t, s, "T"))
	}
	// A damaged record counts as old.
	if err := s.Update(func(tx store.Tx) error {
		return tx.Put(store.HistoryBucket, store.HistoryKey("g", "T", 300), []byte("{half"))
	}); err != nil {
		t.Fatal(err)
	}
	putRecord(t, s, "T", 301, now.Add(24*time.Hour))
	if trim(store.Retention{MaxAge: time.Hour}, now.Add(24*time.Hour)); fmt.Sprint(numbers(t, s, "T")) != "[301]" {
		t.Fatalf("after trimming a damaged record: %v", numbers(t, s, "T"))
	}
	if err := s.Update(func(tx store.Tx) error { return store.DeleteHistory(tx, "g") }); err != nil {
		t.Fatal(err)
	}
	if len(numbers(t, s, "T")) != 0 || len(numbers(t, s, "T2")) != 0 {
		t.Fatal("DeleteHistory left records")
	}
	if _, err := store.HistoryNumber("short"); err == nil {
		t.Fatal("a short key parsed")
	}
}

func TestPutGenerationsTxIsOneTransaction(t *testing.T) {
	s := open(t, t.TempDir())
	gen := store.Generation{Group: "g", Topic: "T", Number: 1}
	boom := errors.New("boom")
	err := s.PutGenerationsTx([]store.Generation{gen}, func(tx store.Tx) error {
		if err := tx.Put(store.HistoryBucket, store.HistoryKey("g", "T", 1), []byte(`{}`)); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	if gens, _ := s.ListGenerations(); len(gens) != 0 || len(numbers(t, s, "T")) != 0 {
		t.Fatalf("a failed transaction left %v and %v", gens, numbers(t, s, "T"))
	}
	if err := s.PutGenerationsTx([]store.Generation{gen}, func(tx store.Tx) error {
		return tx.Put(store.HistoryBucket, store.HistoryKey("g", "T", 1), []byte(`{}`))
	}); err != nil {
		t.Fatal(err)
	}
	if gens, _ := s.ListGenerations(); len(gens) != 1 || len(numbers(t, s, "T")) != 1 {
		t.Fatalf("stored %v and %v", gens, numbers(t, s, "T"))
	}
	if err := s.PutGenerationsTx([]store.Generation{{Group: "", Topic: "T"}}, func(store.Tx) error { return nil }); err == nil {
		t.Fatal("a generation without a group was stored")
	}
}

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
