package coordinator_test

import (
	"strings"
	"testing"

	"github.com/allocd/allocd/coordinator"
)

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"T", "%RETRY%group_1", "a|b-c", strings.Repeat("x", 127)} {
		if err := coordinator.CheckName("topic", ok); err != nil {
			t.Errorf("CheckName(%q): %v", ok, err)
		}
	}
	for name, want := range map[string]string{
		"":                       "topic name is empty",
		strings.Repeat("x", 128): "more than 127",
		"a b":                    `topic name "a b" has ' ' at offset 1`,
		"a/b":                    `'/' at offset 1`,
		"é":                      "offset 0",
	} {
		err := coordinator.CheckName("topic", name)
		if err == nil || !strings.Contains(err.Error(), want) || coordinator.KindOf(err) != coordinator.KindInvalid {
			t.Errorf("CheckName(%q) = %v, want an invalid error containing %q", name, err, want)
		}
	}
}

func TestHeartbeatCheck(t *testing.T) {
	good := coordinator.Heartbeat{CID: "10.0.0.7@1234", Topics: []string{"T"}, InstanceID: "pod-1",
		Labels: map[string]string{"zone": "eu-1a", "weight": "3"}, Generations: map[string]int64{"T": 2}}
	if err := good.Check(); err != nil {
		t.Fatal(err)
	}
	for want, hb := range map[string]coordinator.Heartbeat{
		"cid is empty":                   {},
		"control character":              {CID: "a\nb"},
		"not valid UTF-8":                {CID: "a\xffb"},
		"more than 255":                  {CID: strings.Repeat("c", 256)},
		"instanceId \"\\t\" has control": {CID: "c", InstanceID: "\t"},
		"topic name \"T T\"":             {CID: "c", Topics: []string{"T T"}},
		"label weight \"heavy\"":         {CID: "c", Labels: map[string]string{"weight": "heavy"}},
		"label weight \"-1\"":            {CID: "c", Labels: map[string]string{"weight": "-1"}},
		"label key \"\"":                 {CID: "c", Labels: map[string]string{"": "x"}},
		"generation -1 of topic \"T\"":   {CID: "c", Generations: map[string]int64{"T": -1}},
	} {
		err := hb.Check()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check(%+v) = %v, want an error containing %q", hb, err, want)
		}
	}
}

func TestTopicAndBindingValidation(t *testing.T) {
	e := newEnv(t)
	for want, brokers := range map[string][]coordinator.Broker{
		"has no brokers":           nil,
		`lists broker "a" twice`:   {{Name: "a"}, {Name: "a"}},
		"readQueues -1 is outside": {{Name: "a", ReadQueues: -1}},
		"writeQueues 1025":         {{Name: "a", WriteQueues: 1025}},
		`broker name "a b"`:        {{Name: "a b"}},
	} {
		if _, _, err := e.c.PutTopic("T", brokers); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("PutTopic(%+v) = %v, want %q", brokers, err, want)
		}
	}
	for want, b := range map[string]coordinator.Binding{
		"strategy is required":    {},
		`model "fanout"`:          {Strategy: "averagely", Model: "fanout"},
		`delivery "push"`:         {Strategy: "averagely", Delivery: "push"},
		`strategy "../x" has '/'`: {Strategy: "../x"},
		`config key "" must be 1`: {Strategy: "hash", Config: map[string]string{"": "1"}},
	} {
		if _, _, err := e.c.PutGroup("g", b); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("PutGroup(%+v) = %v, want %q", b, err, want)
		}
	}
	g, created, err := e.c.PutGroup("g", coordinator.Binding{Model: coordinator.Broadcasting})
	if err != nil || !created || g.Delivery != coordinator.QueueDelivery || g.Config == nil {
		t.Fatalf("broadcasting group without a strategy: %+v, %v, %v", g, created, err)
	}
}
