package rocketmq

import (
	"cmp"
	"strings"
	"unicode/utf8"
)

// CompareJava orders strings as Java's String.compareTo does: by UTF-16 code units, a shorter
// prefix first. It differs from Go's byte order (code point order) only between a character above
// U+FFFF, whose first code unit is a surrogate (0xD800-0xDBFF), and one of U+E000-U+FFFF:
// Java puts "🏠" (U+1F3E0, 0xD83C 0xDFE0) before "～" (U+FF5E), Go after. RocketMQ's TreeMaps of
// machine rooms are ordered this way.
//
// Bytes that are not valid UTF-8 (which a Java string cannot hold) compare as U+FFFD, and two
// strings equal under that rule are ordered byte-wise, so the order stays total.
func CompareJava(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return cmp.Compare(len(a), len(b))
	}
	if a[i] < utf8.RuneSelf && b[i] < utf8.RuneSelf {
		return cmp.Compare(a[i], b[i])
	}
	// The strings agree up to i, so they agree on where the character holding byte i starts.
	for i > 0 && !(utf8.RuneStart(a[i]) && utf8.RuneStart(b[i])) {
		i--
	}
	ra, _ := utf8.DecodeRuneInString(a[i:])
	rb, _ := utf8.DecodeRuneInString(b[i:])
	if ra == rb {
		return strings.Compare(a, b)
	}
	if c := cmp.Compare(firstUnit(ra), firstUnit(rb)); c != 0 {
		return c
	}
	return cmp.Compare(ra, rb) // two characters above U+FFFF: code point order is UTF-16 order
}

// firstUnit is the first UTF-16 code unit of r: r itself in the BMP, else its high surrogate.
func firstUnit(r rune) rune {
	if r < 0x10000 {
		return r
	}
	return 0xD800 + (r-0x10000)>>10
}

// BrokerRoom splits a broker name on "@" as Java's brokerName.split("@") does and returns the
// first part when there are exactly two: AllocateMessageQueueByMachineRoom's "IDC@broker" form.
// Java's split drops trailing empty parts only, so "IDC1@b@" has two parts (room "IDC1") and "@b"
// has two (room ""), while "IDC1@", "b", "" have one, "@" none, and "IDC1@@b" and "IDC1@b@slave"
// three.
func BrokerRoom(brokerName string) (room string, ok bool) {
	at := strings.IndexByte(brokerName, '@')
	if at < 0 {
		return "", false // one part: the whole name
	}
	rest := brokerName[at+1:]
	next := strings.IndexByte(rest, '@')
	if next < 0 {
		if rest == "" {
			return "", false // [room, ""]: the trailing empty part is dropped
		}
		return brokerName[:at], true
	}
	// A third part exists; it and every later part must be empty (and so dropped), and the
	// second part must not be, or the count is not two.
	if next == 0 || strings.Trim(rest[next:], "@") != "" {
		return "", false
	}
	return brokerName[:at], true
}
