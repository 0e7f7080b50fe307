package rocketmq

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
)

// compareUTF16 is the reference: Java's compareTo over the standard library's UTF-16 encoding.
func compareUTF16(a, b string) int {
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

func TestCompareJava(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"IDC10", "IDC2", -1}, // character by character, no numeric order
		{"Zone", "_z", -1},    // upper case, then '_', then lower case
		{"_z", "a", -1},
		{"🏠", "～", -1}, // U+1F3E0 is 0xD83C 0xDFE0 in UTF-16, below U+FF5E: the reverse of byte order
		{"room🏠", "room～", -1},
		{"～", "\uE000", 1},
		{"🏠", "🏡", -1},     // two characters above U+FFFF: code point order
		{"机房1", "zone", 1}, // U+673A above ASCII
		{"a", "ab", -1},
		{"", "a", -1},
		{"same", "same", 0},
		{" ", "\t", 1},
		{"é", "e\u0301", 1}, // no normalisation: U+00E9 against 'e' then a combining accent
	} {
		if got := CompareJava(c.a, c.b); got != c.want {
			t.Errorf("CompareJava(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := CompareJava(c.b, c.a); got != -c.want {
			t.Errorf("CompareJava(%q, %q) = %d, want %d", c.b, c.a, got, -c.want)
		}
		if got := compareUTF16(c.a, c.b); got != c.want {
			t.Errorf("reference disagrees on (%q, %q): %d", c.a, c.b, got)
		}
	}
	// Go's own order puts "～" first: the case the rooms' order depends on.
	if strings.Compare("🏠", "～") != 1 {
		t.Fatal("byte order of the example changed")
	}
	rooms := []string{"～room", "zone-é", "🏠room", "zone-e", "机房1", "IDC2", "IDC10"}
	slices.SortFunc(rooms, CompareJava)
	want := []string{"IDC10", "IDC2", "zone-e", "zone-é", "机房1", "🏠room", "～room"}
	if !slices.Equal(rooms, want) {
		t.Fatalf("sorted %q, want %q", rooms, want)
	}
}

// FuzzCompareJava: on valid UTF-8, CompareJava agrees with the UTF-16 reference; on any bytes it
// is a total order consistent with equality.
func FuzzCompareJava(f *testing.F) {
	for _, s := range [][2]string{{"🏠", "～"}, {"IDC10", "IDC2"}, {"a", "ab"}, {"\xff", "\xfe"}, {"x\xffy", "x\xfez"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		got := CompareJava(a, b)
		if got != -CompareJava(b, a) {
			t.Fatalf("not antisymmetric on %q, %q", a, b)
		}
		if (got == 0) != (a == b) {
			t.Fatalf("CompareJava(%q, %q) = %d", a, b, got)
		}
		if !strings.ContainsRune(a+b, '\uFFFD') && validUTF8(a) && validUTF8(b) {
			if want := compareUTF16(a, b); got != want {
				t.Fatalf("CompareJava(%q, %q) = %d, UTF-16 order %d", a, b, got, want)
			}
		}
	})
}

func validUTF8(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// javaSplitParts is String.split("@")'s part count, by its definition: split on every "@", drop
// trailing empty parts, and a string without "@" is one part (itself, even when empty).
func javaSplitParts(s string) []string {
	if !strings.Contains(s, "@") {
		return []string{s}
	}
	parts := strings.Split(s, "@")
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}

func TestBrokerRoom(t *testing.T) {
	for _, c := range []struct {
		broker, room string
		ok           bool
	}{
		{"IDC1@broker-a", "IDC1", true},
		{"IDC1@b@", "IDC1", true},  // the trailing empty part is dropped: two parts
		{"IDC1@b@@", "IDC1", true}, // every trailing empty part
		{"@b", "", true},           // a leading empty part stays: room ""
		{"@b@", "", true},
		{"IDC1@", "", false}, // one part
		{"IDC1@@", "", false},
		{"b", "", false},
		{"", "", false},
		{"@", "", false}, // no part at all
		{"@@", "", false},
		{"IDC1@@b", "", false}, // three parts
		{"IDC1@b@slave", "", false},
		{"idc1@B", "idc1", true},
	} {
		room, ok := BrokerRoom(c.broker)
		if room != c.room || ok != c.ok {
			t.Errorf("BrokerRoom(%q) = %q, %v; want %q, %v", c.broker, room, ok, c.room, c.ok)
		}
		if parts := javaSplitParts(c.broker); (len(parts) == 2) != c.ok {
			t.Errorf("reference split of %q: %q", c.broker, parts)
		}
	}
}

// FuzzBrokerRoom: BrokerRoom agrees with the definition of Java's split on any name.
func FuzzBrokerRoom(f *testing.F) {
	for _, s := range []string{"IDC1@b@", "@b", "@", "a@@b", "a@b@c", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		room, ok := BrokerRoom(s)
		parts := javaSplitParts(s)
		if ok != (len(parts) == 2) || (ok && room != parts[0]) {
			t.Fatalf("BrokerRoom(%q) = %q, %v; Java's split gives %q", s, room, ok, parts)
		}
	})
}

func TestQueueString(t *testing.T) {
	if got := QueueString("TopicTest", "broker-a", 0); got != "MessageQueue [topic=TopicTest, brokerName=broker-a, queueId=0]" {
		t.Fatal(got)
	}
	if got := QueueString("T", "b", -7); got != "MessageQueue [topic=T, brokerName=b, queueId=-7]" {
		t.Fatal(got)
	}
}
