package harness

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/allocd/allocd/abi"
)

// Scenario is one consumer group the harness asks a plugin about. Its JSON is a line that
// `allocd allocate --plugin NAME` accepts as it is (that command ignores the fields it does not
// know), and Request turns it back into the request the harness sent, so a failure's scenario can
// be pasted into either.
type Scenario struct {
	Group  string      `json:"group"`
	MQAll  []abi.Queue `json:"mqAll"`
	CIDAll []string    `json:"cidAll"`
	// CID, when set, makes the request ask for this consumer only (as `allocd allocate` does).
	CID string `json:"cid,omitempty"`
	// Outsider, when set, is a consumer id that is not in CIDAll; the request asks for every
	// member and for it, and it must get nothing.
	Outsider      string            `json:"outsider,omitempty"`
	Config        map[string]string `json:"config,omitempty"`
	QueueAttrs    []abi.Attrs       `json:"queueAttrs,omitempty"`
	ConsumerAttrs []abi.Attrs       `json:"consumerAttrs,omitempty"`
	PrevOwners    []string          `json:"prevOwners,omitempty"`
}

// Request builds a fresh request for the scenario: every slice is the request's own, so a
// plugin that changes its request cannot change the scenario. Without CID or Outsider it asks
// for the whole group (no targets).
func (s *Scenario) Request() *abi.Request {
	r := &abi.Request{
		Group:     s.Group,
		Queues:    slices.Clone(s.MQAll),
		Consumers: slices.Clone(s.CIDAll),
	}
	switch {
	case s.CID != "":
		r.Targets = []string{s.CID}
	case s.Outsider != "":
		r.Targets = append(slices.Clone(s.CIDAll), s.Outsider)
	}
	if r.Queues == nil {
		r.Queues = []abi.Queue{}
	}
	if r.Consumers == nil {
		r.Consumers = []string{}
	}
	if s.Config != nil {
		r.Config = make(map[string]string, len(s.Config))
		for k, v := range s.Config {
			r.Config[k] = v
		}
	}
	if s.QueueAttrs != nil {
		r.QueueAttrs = cloneAttrs(s.QueueAttrs)
	}
	if s.ConsumerAttrs != nil {
		r.ConsumerAttrs = cloneAttrs(s.ConsumerAttrs)
	}
	if s.PrevOwners != nil {
		r.PrevOwners = slices.Clone(s.PrevOwners)
	}
	return r
}

func cloneAttrs(as []abi.Attrs) []abi.Attrs {
	out := make([]abi.Attrs, len(as))
	for i, a := range as {
		if a.Labels != nil {
			out[i].Labels = make(map[string]string, len(a.Labels))
			for k, v := range a.Labels {
				out[i].Labels[k] = v
			}
		}
		if a.Metrics != nil {
			out[i].Metrics = make(map[string]int64, len(a.Metrics))
			for k, v := range a.Metrics {
				out[i].Metrics[k] = v
			}
		}
	}
	return out
}

// clone copies the scenario deeply.
func (s *Scenario) clone() *Scenario {
	c := *s
	c.MQAll = slices.Clone(s.MQAll)
	c.CIDAll = slices.Clone(s.CIDAll)
	c.PrevOwners = slices.Clone(s.PrevOwners)
	if s.QueueAttrs != nil {
		c.QueueAttrs = cloneAttrs(s.QueueAttrs)
	}
	if s.ConsumerAttrs != nil {
		c.ConsumerAttrs = cloneAttrs(s.ConsumerAttrs)
	}
	return &c
}

// Size describes the scenario in a few words: "300 queues, 17 consumers".
func (s *Scenario) Size() string {
	return fmt.Sprintf("%s, %s", plural(len(s.MQAll), "queue"), plural(len(s.CIDAll), "consumer"))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// canonicalize sorts the queues and consumers as the host does, carrying attributes and previous
// owners along.
func (s *Scenario) canonicalize() {
	r := &abi.Request{Queues: s.MQAll, Consumers: s.CIDAll, QueueAttrs: s.QueueAttrs, ConsumerAttrs: s.ConsumerAttrs, PrevOwners: s.PrevOwners}
	abi.Canonicalize(r)
	s.MQAll, s.CIDAll, s.QueueAttrs, s.ConsumerAttrs, s.PrevOwners = r.Queues, r.Consumers, r.QueueAttrs, r.ConsumerAttrs, r.PrevOwners
}

// Event is a change of membership: one consumer joins or leaves.
type Event struct {
	Kind     string `json:"kind"` // "join" or "leave"
	Consumer string `json:"consumer"`
}

// Membership events.
const (
	Join  = "join"
	Leave = "leave"
)

// after returns the scenario after ev, with each queue's previous owner taken from owners (the
// plugin's answer before the change). It asks for the whole group.
func (s *Scenario) after(ev Event, owners []string) *Scenario {
	a := s.clone()
	a.CID, a.Outsider = "", ""
	a.PrevOwners = slices.Clone(owners)
	switch ev.Kind {
	case Join:
		a.CIDAll = append(a.CIDAll, ev.Consumer)
		if a.ConsumerAttrs != nil {
			var attrs abi.Attrs
			// The newcomer gets one of the zones present, so zone preferences keep mattering.
			if zones := zonesOf(s.ConsumerAttrs); len(zones) > 0 {
				attrs.Labels = map[string]string{"zone": zones[len(a.CIDAll)%len(zones)]}
			}
			a.ConsumerAttrs = append(a.ConsumerAttrs, attrs)
		}
	case Leave:
		i := slices.Index(a.CIDAll, ev.Consumer)
		if i >= 0 {
			a.CIDAll = slices.Delete(a.CIDAll, i, i+1)
			if a.ConsumerAttrs != nil {
				a.ConsumerAttrs = slices.Delete(a.ConsumerAttrs, i, i+1)
			}
		}
	}
	a.canonicalize()
	return a
}

func zonesOf(attrs []abi.Attrs) []string {
	var zones []string
	for _, a := range attrs {
		if z := a.Labels["zone"]; z != "" && !slices.Contains(zones, z) {
			zones = append(zones, z)
		}
	}
	slices.Sort(zones)
	return zones
}

// Default limits of generated scenarios.
const (
	DefaultMaxQueues    = 2000
	DefaultMaxConsumers = 300
)

// Generate returns scenario index of the sequence that seed defines, with up to
// DefaultMaxQueues queues and DefaultMaxConsumers consumers. The same seed and index always give
// the same scenario. Scenario 0 is one queue and one consumer, scenario 1 the largest group,
// scenario 2 more consumers than queues; the rest are drawn at random.
func Generate(seed uint64, index int) *Scenario {
	return generate(seed, index, DefaultMaxQueues, DefaultMaxConsumers, true)
}

var (
	topicNames  = []string{"TopicTest", "order-events", "%RETRY%CG_payment", "payments.v2", "日志-topic", "a b"}
	brokerNames = []string{"broker-a", "broker-b", "broker-c", "rmq-broker-0", "rmq-broker-1", "broker@east"}
	zoneNames   = []string{"eu-west-1a", "eu-west-1b", "us-east-1c"}
)

// generate draws scenario index from seed. Without extras it has no attributes, previous owners
// or outsider (the fixed-size groups of the movement figure).
func generate(seed uint64, index, maxQ, maxC int, extras bool) *Scenario {
	rng := rand.New(rand.NewPCG(seed, uint64(index)))
	var q, c int
	switch {
	case index == 0:
		q, c = 1, 1
	case index == 1:
		q, c = maxQ, maxC
	case index == 2:
		q = 1 + rng.IntN(8)
		c = q + 1 + rng.IntN(20)
	default:
		switch r := rng.IntN(100); {
		case r < 15:
			q, c = 1+rng.IntN(8), 1+rng.IntN(8)
		case r < 35: // more consumers than queues
			q = 1 + rng.IntN(64)
			c = q + 1 + rng.IntN(64)
		case r < 80:
			q, c = 1+rng.IntN(256), 1+rng.IntN(32)
		default:
			q, c = 256+rng.IntN(max(1, maxQ-255)), 1+rng.IntN(maxC)
		}
	}
	q, c = max(1, min(q, maxQ)), max(1, min(c, maxC))
	s := sized(rng, q, c)
	if !extras {
		return s
	}
	if rng.IntN(2) == 0 {
		s.Outsider = newConsumerID(rng, s.CIDAll)
	}
	if rng.IntN(10) < 3 {
		zones := zoneNames[:1+rng.IntN(len(zoneNames))]
		s.QueueAttrs = make([]abi.Attrs, q)
		for i := range s.QueueAttrs {
			if rng.IntN(100) < 85 {
				s.QueueAttrs[i].Labels = map[string]string{"zone": zones[rng.IntN(len(zones))]}
			}
			if rng.IntN(2) == 0 {
				s.QueueAttrs[i].Metrics = map[string]int64{"lag": int64(rng.IntN(100000))}
			}
		}
		s.ConsumerAttrs = make([]abi.Attrs, c)
		for j := range s.ConsumerAttrs {
			if rng.IntN(100) < 85 {
				s.ConsumerAttrs[j].Labels = map[string]string{"zone": zones[rng.IntN(len(zones))]}
			}
			if rng.IntN(2) == 0 {
				// As the daemon passes a member's "weight" label: as the label and as the
				// metric. A weight of 0 (the member takes nothing) now and then.
				w := int64(rng.IntN(5))
				if w == 0 && rng.IntN(3) > 0 {
					w = 1
				}
				if s.ConsumerAttrs[j].Labels == nil {
					s.ConsumerAttrs[j].Labels = map[string]string{}
				}
				s.ConsumerAttrs[j].Labels[WeightLabel] = strconv.FormatInt(w, 10)
				s.ConsumerAttrs[j].Metrics = map[string]int64{WeightLabel: w}
			}
		}
	}
	if rng.IntN(10) < 3 {
		s.PrevOwners = make([]string, q)
		for i := range s.PrevOwners {
			switch r := rng.IntN(10); {
			case r < 6:
				s.PrevOwners[i] = s.CIDAll[rng.IntN(c)]
			case r < 8:
				s.PrevOwners[i] = fmt.Sprintf("gone@%d#%d", rng.IntN(4), rng.IntN(1000))
			}
		}
	}
	return s
}

// sized draws a group of exactly q queues and c consumers, in canonical order.
func sized(rng *rand.Rand, q, c int) *Scenario {
	s := &Scenario{Group: groupName(rng)}
	topics := topicNames[:1+rng.IntN(min(4, q))]
	brokers := brokerNames[:1+rng.IntN(4)]
	gaps := rng.IntN(5) == 0
	// Spread q queues over the (topic, broker) pairs, each pair a run of queue ids.
	pairs := len(topics) * len(brokers)
	next := make([]int32, pairs)
	for i := 0; i < q; i++ {
		p := i % pairs
		if i >= pairs {
			p = rng.IntN(pairs)
		}
		id := next[p]
		next[p]++
		if gaps {
			next[p] += int32(rng.IntN(3))
		}
		s.MQAll = append(s.MQAll, abi.Queue{Topic: topics[p/len(brokers)], BrokerName: brokers[p%len(brokers)], QueueID: id})
	}
	for len(s.CIDAll) < c {
		s.CIDAll = append(s.CIDAll, newConsumerID(rng, s.CIDAll))
	}
	s.canonicalize()
	return s
}

func groupName(rng *rand.Rand) string {
	return []string{"CG_payment", "please_rename_unique_group_name", "group with spaces", "グループ#1"}[rng.IntN(4)]
}

// newConsumerID draws a consumer id that is not in taken: RocketMQ's ip@pid#nanotime form, and
// ids with unicode, spaces, quotes, '@' and '#'.
func newConsumerID(rng *rand.Rand, taken []string) string {
	for {
		var id string
		switch rng.IntN(9) {
		case 0, 1, 2:
			id = fmt.Sprintf("10.%d.%d.%d@%d#%d", rng.IntN(4), rng.IntN(256), rng.IntN(256), rng.IntN(65536), rng.Int64N(1e16))
		case 3:
			id = fmt.Sprintf("消费者-%d", rng.IntN(10000))
		case 4:
			id = fmt.Sprintf("consumer %d", rng.IntN(10000))
		case 5:
			id = fmt.Sprintf(`c"%d'q`, rng.IntN(10000))
		case 6:
			id = fmt.Sprintf("ünïcødé@%d#%d", rng.IntN(100), rng.IntN(10000))
		case 7:
			id = fmt.Sprintf("🚀 #%d@host", rng.IntN(10000))
		default:
			id = fmt.Sprintf(" lead\\space@%d ", rng.IntN(10000))
		}
		if !slices.Contains(taken, id) {
			return id
		}
	}
}

// ownersOf returns, for every queue, the member that a whole-group answer gives it to ("" for
// nobody). Results of targets that are not members (an outsider) are ignored.
func ownersOf(req *abi.Request, resp *abi.Response) []string {
	owners := make([]string, len(req.Queues))
	members := make(map[string]bool, len(req.Consumers))
	for _, c := range req.Consumers {
		members[c] = true
	}
	for t, res := range resp.Results {
		if res.Failed || !members[req.Target(t)] {
			continue
		}
		for _, q := range res.Indices {
			owners[q] = req.Target(t)
		}
	}
	return owners
}

// formatIndices prints a list of queue indices, cut short when long.
func formatIndices(idx []int) string {
	const show = 12
	var b strings.Builder
	b.WriteByte('[')
	for i, x := range idx {
		if i == show {
			fmt.Fprintf(&b, " ... %d more", len(idx)-show)
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprint(&b, x)
	}
	b.WriteByte(']')
	return b.String()
}

func formatResult(r abi.Result) string {
	if r.Failed {
		return fmt.Sprintf("error %q", r.Err)
	}
	return formatIndices(r.Indices)
}
