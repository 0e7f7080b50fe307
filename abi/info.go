package abi

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// Properties a plugin may promise in its self-description. The harness checks each promise.
const (
	// PropBalanced: in every whole-group answer, queue counts per member differ by at most one.
	PropBalanced = "balanced"
	// PropPartial: the plugin may leave queues unassigned. Without it, every queue must be
	// given to some member whenever the group has members.
	PropPartial = "partial"
	// PropSticky: when one member joins or leaves, no queue moves between two members that were
	// there before and after, beyond what the plugin's own load bound forces (a join lowers the
	// bound, and members above the new bound shed queues the newcomer may not all take).
	PropSticky = "sticky"
	// PropOverlapping: the plugin may give a queue to more than one consumer, or name it more
	// than once in one result (RocketMQ's CONFIG hands out configured lists as they are). The
	// host's answer check then only bounds the indices (ValidateFor).
	PropOverlapping = "overlapping"
	// PropZoned: the plugin reads the label "zone" of every queue and consumer and fails every
	// member of a group where one lacks it or has it empty; a queue whose zone has members goes
	// to a member of that zone (RocketMQ's MACHINE_ROOM_NEARBY). The harness gives every queue
	// and consumer of its scenarios a zone, and checks the second half.
	PropZoned = "zoned"
)

// Info is a plugin's self-description, returned as JSON by its allocd_describe export.
type Info struct {
	Name        string   `json:"name"`
	Version     string   `json:"version"`
	ABI         string   `json:"abi"`
	Description string   `json:"description,omitempty"`
	Properties  []string `json:"properties,omitempty"`
	// Config documents the configuration keys the plugin reads, key to one-line description.
	Config map[string]string `json:"config,omitempty"`
	// CheckConfig is the configuration the harness (`allocd check`, the check before a new
	// version serves) binds the plugin with when it is given none: for a plugin that fails
	// without settings, as RocketMQ's MACHINE_ROOM does without its set of rooms.
	CheckConfig map[string]string `json:"checkConfig,omitempty"`
}

// Has reports whether the plugin promises property p.
func (i Info) Has(p string) bool {
	for _, q := range i.Properties {
		if q == p {
			return true
		}
	}
	return false
}

// ParseInfo decodes a self-description and checks its required fields.
func ParseInfo(b []byte) (*Info, error) {
	var in Info
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, errorf("self-description is not valid JSON: %v", err)
	}
	if in.Name == "" {
		return nil, errorf("self-description has no name")
	}
	return &in, nil
}

// AppendJSON appends i as JSON without reflection, so a plugin need not link encoding/json to
// describe itself. Keys of Config are written in sorted order.
func (i *Info) AppendJSON(b []byte) []byte {
	b = append(b, `{"name":`...)
	b = appendJSONString(b, i.Name)
	b = append(b, `,"version":`...)
	b = appendJSONString(b, i.Version)
	b = append(b, `,"abi":`...)
	abiVersion := i.ABI
	if abiVersion == "" {
		abiVersion = strconv.Itoa(Major) + "." + strconv.Itoa(Minor)
	}
	b = appendJSONString(b, abiVersion)
	if i.Description != "" {
		b = append(b, `,"description":`...)
		b = appendJSONString(b, i.Description)
	}
	if len(i.Properties) > 0 {
		b = append(b, `,"properties":[`...)
		for n, p := range i.Properties {
			if n > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, p)
		}
		b = append(b, ']')
	}
	b = appendJSONObject(b, "config", i.Config)
	b = appendJSONObject(b, "checkConfig", i.CheckConfig)
	return append(b, '}')
}

// appendJSONObject appends `,"name":{...}` with m's keys sorted, or nothing when m is empty.
func appendJSONObject(b []byte, name string, m map[string]string) []byte {
	if len(m) == 0 {
		return b
	}
	b = append(b, ',')
	b = appendJSONString(b, name)
	b = append(b, `:{`...)
	for n, k := range sortedKeys(nil, m) {
		if n > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendJSONString(b, m[k])
	}
	return append(b, '}')
}

func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			b = append(b, c)
			i++
			continue
		}
		if c < utf8.RuneSelf {
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\t':
				b = append(b, '\\', 't')
			case '\r':
				b = append(b, '\\', 'r')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
