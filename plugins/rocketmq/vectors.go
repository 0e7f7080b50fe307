package rocketmq

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
)

// Queue is one element of mqAll in the Java reference vectors (a RocketMQ MessageQueue).
type Queue struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
}

// Vector is one line of testdata/rocketmq-java-vectors-*.jsonl: one call of a Java strategy and
// what it returned (Result, in returned order, as indices into MQAll) or threw (Error, e.g.
// "IllegalArgumentException: mqAll is null or mqAll empty").
//
// HasResult distinguishes Java returning a list (possibly empty) from Java throwing (result null).
type Vector struct {
	Strategy       string   `json:"strategy"`
	Vnodes         int      `json:"vnodes"`
	VnodesDefault  bool     `json:"vnodesDefault"`
	Group          string   `json:"group"`
	CID            string   `json:"cid"`
	MQAll          []Queue  `json:"mqAll"`
	CIDAll         []string `json:"cidAll"`
	Result         []int    `json:"result"`
	HasResult      bool     `json:"-"`
	Error          string   `json:"error"`
	MemberOfCidAll bool     `json:"memberOfCidAll"`
	Scenario       int      `json:"scenario"`
	Family         string   `json:"family"`

	// Line is the 1-based line of the vector in its file, for test messages.
	Line int `json:"-"`
}

// JavaExceptionPrefix starts every Error of the reference vectors.
const JavaExceptionPrefix = "IllegalArgumentException: "

// WantError returns the message Java threw for v, without JavaExceptionPrefix, or "" when Java
// returned a list.
func (v *Vector) WantError() string { return strings.TrimPrefix(v.Error, JavaExceptionPrefix) }

// Consumer returns cidAll[i]; it fits the consumer callbacks of IndexOf and hash.NewRing.
func (v *Vector) Consumer(i int) string { return v.CIDAll[i] }

// Queue returns mqAll[i]; it fits the queue callback of hash.Ring.Assign.
func (v *Vector) Queue(i int) (topic, brokerName string, queueID int32) {
	q := &v.MQAll[i]
	return q.Topic, q.BrokerName, q.QueueID
}

// LoadVectors reads a JSON-lines vector file (format: section 8 of
// shared/specs/rocketmq-strategies.md). Blank lines are skipped. It is test support; because
// of it, importing this package links encoding/json (about 48 KB of a wasip1 plugin).
func LoadVectors(path string) ([]Vector, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Vector
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<30)
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		var v struct {
			Vector
			RawResult json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, errors.New(path + ":" + strconv.Itoa(line) + ": " + err.Error())
		}
		vec := v.Vector
		vec.Line = line
		if len(v.RawResult) > 0 && string(v.RawResult) != "null" {
			vec.Result = []int{}
			if err := json.Unmarshal(v.RawResult, &vec.Result); err != nil {
				return nil, errors.New(path + ":" + strconv.Itoa(line) + ": result: " + err.Error())
			}
			vec.HasResult = true
		}
		out = append(out, vec)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
