package machineroom_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/allocd/allocd/plugins/machineroom"
)

func TestBlocksThenLeftovers(t *testing.T) {
	p := []int{10, 11, 12, 13, 14}
	// P=5, c=2: a block of 2 each, then the one leftover to consumer 0; not AVG's {0,1,2} {3,4}.
	if got := machineroom.Allocate(nil, p, 2, 0); !slices.Equal(got, []int{10, 11, 14}) {
		t.Errorf("self 0: %v", got)
	}
	if got := machineroom.Allocate(nil, p, 2, 1); !slices.Equal(got, []int{12, 13}) {
		t.Errorf("self 1: %v", got)
	}
	// More consumers than queues: no block, a leftover each for the first.
	for self, want := range [][]int{{10}, {11}, {12}, {13}, {14}, {}, {}} {
		if got := machineroom.Allocate(nil, p, 7, self); !slices.Equal(got, want) {
			t.Errorf("c=7 self %d: %v, want %v", self, got, want)
		}
	}
	for _, self := range []int{-1, 2} {
		if got := machineroom.Allocate(nil, p, 2, self); len(got) != 0 {
			t.Errorf("self %d: %v", self, got)
		}
	}
}

// TestUpstreamExample is RocketMQ's own unit test: queues 0-4 on room1@broker-a, 5-9 on
// room2@broker-b, consumeridcs {room1}, two consumers.
func TestUpstreamExample(t *testing.T) {
	brokers := []string{"room1@broker-a", "room1@broker-a", "room1@broker-a", "room1@broker-a", "room1@broker-a",
		"room2@broker-b", "room2@broker-b", "room2@broker-b", "room2@broker-b", "room2@broker-b"}
	p, err := machineroom.Filter(nil, machineroom.NewRooms("room1"), len(brokers), func(i int) string { return brokers[i] })
	if err != nil || !slices.Equal(p, []int{0, 1, 2, 3, 4}) {
		t.Fatalf("Filter = %v, %v", p, err)
	}
	if a, b := machineroom.Allocate(nil, p, 2, 0), machineroom.Allocate(nil, p, 2, 1); !slices.Equal(a, []int{0, 1, 4}) || !slices.Equal(b, []int{2, 3}) {
		t.Fatalf("got %v and %v", a, b)
	}
}

func TestFilterQuirks(t *testing.T) {
	brokers := []string{"IDC1@b", "idc1@b", "IDC1@b@", "@b", "IDC1@", "b", "", "@", "IDC1@@b", "IDC1@b@slave", "IDC2@b"}
	at := func(i int) string { return brokers[i] }
	for _, c := range []struct {
		rooms machineroom.Rooms
		want  []int
	}{
		{machineroom.NewRooms("IDC1"), []int{0, 2}}, // case-sensitive; a trailing "@" is dropped
		{machineroom.NewRooms("IDC1", "IDC1", "IDC2"), []int{0, 2, 10}},
		{machineroom.NewRooms(""), []int{3}}, // "@b" is room ""
		{machineroom.NewRooms(), nil},        // an empty set: nothing for anyone
		{machineroom.NewRooms("IDC3"), nil},
	} {
		got, err := machineroom.Filter(nil, c.rooms, len(brokers), at)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Filter(%v) = %v, %v; want %v", c.rooms, got, err, c.want)
		}
	}
	// Never set: Java's NullPointerException once a broker name has two parts, not before.
	if _, err := machineroom.Filter(nil, machineroom.Rooms{}, len(brokers), at); !errors.Is(err, machineroom.ErrRoomsNotSet) {
		t.Errorf("never set: err = %v", err)
	}
	one := []string{"b", "IDC1@", "@", "a@@b"}
	if got, err := machineroom.Filter(nil, machineroom.Rooms{}, len(one), func(i int) string { return one[i] }); err != nil || len(got) != 0 {
		t.Errorf("never set, no two-part name: %v, %v", got, err)
	}
	if !strings.Contains(machineroom.ErrRoomsNotSet.Error(), `NullPointerException: Cannot invoke "java.util.Set.contains(Object)" because "this.consumeridcs" is null`) {
		t.Errorf("the error does not quote Java's: %v", machineroom.ErrRoomsNotSet)
	}
}

func TestParseRooms(t *testing.T) {
	for _, c := range []struct {
		text    string
		present bool
		set     bool
		in, out string
	}{
		{"", false, false, "", ""},
		{"null", true, false, "", ""},
		{`[]`, true, true, "", "IDC1"},
		{`["IDC1","IDC2","IDC1"]`, true, true, "IDC2", "idc2"},
		{`["", " "]`, true, true, " ", "\t"},
	} {
		r, err := machineroom.ParseRooms(c.text, c.present)
		if err != nil || r.Set() != c.set || (c.in != "" && !r.Contains(c.in)) || r.Contains(c.out) {
			t.Errorf("ParseRooms(%q, %v) = %+v, %v", c.text, c.present, r, err)
		}
	}
	for _, bad := range []string{`IDC1`, `{"a":1}`, `[1]`, `"IDC1"`, ``} {
		if _, err := machineroom.ParseRooms(bad, true); err == nil || !strings.Contains(err.Error(), "consumeridcs") {
			t.Errorf("ParseRooms(%q) = %v, want an error naming the key", bad, err)
		}
	}
}

// FuzzParseRooms: any config text parses or fails with an error naming the key; a parsed set
// contains every listed room.
func FuzzParseRooms(f *testing.F) {
	f.Add(`["IDC1",""]`)
	f.Add(`null`)
	f.Add(`[1`)
	f.Fuzz(func(t *testing.T, text string) {
		r, err := machineroom.ParseRooms(text, true)
		if err != nil {
			if !strings.Contains(err.Error(), "consumeridcs") {
				t.Fatalf("error %v does not name the key", err)
			}
			return
		}
		var names []string
		if json.Unmarshal([]byte(text), &names) == nil {
			for _, n := range names {
				if !r.Contains(n) {
					t.Fatalf("%q parsed without %q", text, n)
				}
			}
		}
	})
}
