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
// HasResult distinguishes Java returning a list (possibly empty) from Java throwing or returning
// null (result null). The strategies' settings are in the fields after Family (format:
// shared/specs/rocketmq-rooms.md, "Fields").
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

	// Configured is CONFIG's list (indices into MQAll), HasConfigured false when it was never
	// set (Java returns null).
	Configured    []int `json:"-"`
	HasConfigured bool  `json:"-"`
	// ConsumerIDCs is MACHINE_ROOM's set of rooms, HasConsumerIDCs false when it was never set
	// (Java throws NullPointerException once a broker name has two parts).
	ConsumerIDCs    []string `json:"consumeridcs"`
	HasConsumerIDCs bool     `json:"-"`
	// Inner is MACHINE_ROOM_NEARBY's inner strategy (AVG, AVG_BY_CIRCLE, CONSISTENT_HASH with 10
	// virtual nodes); MQRooms and CIDRooms, parallel to MQAll and CIDAll, are its resolver's
	// answers (nil for Java's null).
	Inner    string    `json:"inner"`
	MQRooms  []*string `json:"mqRooms"`
	CIDRooms []*string `json:"cidRooms"`

	// Line is the 1-based line of the vector in its file, for test messages.
	Line int `json:"-"`
}

// JavaExceptionPrefix starts the Error of a vector where Java threw IllegalArgumentException, the
// exception of the argument checks. (MACHINE_ROOM's unset set throws NullPointerException.)
const JavaExceptionPrefix = "IllegalArgumentException: "

// WantError returns the message Java threw for v, without its exception's class name ("Xxx: "),
// or "" when Java did not throw.
func (v *Vector) WantError() string {
	if i := strings.Index(v.Error, ": "); i > 0 && strings.HasSuffix(v.Error[:i], "Exception") && !strings.Contains(v.Error[:i], " ") {
		return v.Error[i+2:]
	}
	return v.Error
}

// Want is what allocd must answer for v: Java's result, with two differences. A null result
// (CONFIG never set) is an empty list, as RocketMQ's RebalanceImpl treats it; and a consumer that
// is not in cidAll gets nothing from CONFIG too (allocd assigns queues only to members, where
// Java's CONFIG returns its list to anyone). An error is reported as failed.
func (v *Vector) Want() (result []int, failed bool) {
	switch {
	case v.Error != "":
		return nil, true
	case !v.HasResult, v.Strategy == StrategyConfig && !v.MemberOfCidAll:
		return []int{}, false
	}
	return v.Result, false
}

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
			RawConfig json.RawMessage `json:"config"`
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
		if len(v.RawConfig) > 0 && string(v.RawConfig) != "null" {
			vec.Configured = []int{}
			if err := json.Unmarshal(v.RawConfig, &vec.Configured); err != nil {
				return nil, errors.New(path + ":" + strconv.Itoa(line) + ": config: " + err.Error())
			}
			vec.HasConfigured = true
		}
		vec.HasConsumerIDCs = vec.ConsumerIDCs != nil
		for _, list := range [][]int{vec.Result, vec.Configured} {
			for _, x := range list {
				if x < 0 || x >= len(vec.MQAll) {
					return nil, errors.New(path + ":" + strconv.Itoa(line) + ": queue index " + strconv.Itoa(x) + " out of range")
				}
			}
		}
		if (vec.MQRooms != nil && len(vec.MQRooms) != len(vec.MQAll)) || (vec.CIDRooms != nil && len(vec.CIDRooms) != len(vec.CIDAll)) {
			return nil, errors.New(path + ":" + strconv.Itoa(line) + ": mqRooms or cidRooms not parallel to mqAll or cidAll")
		}
		out = append(out, vec)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
