package ui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/coordinator"
	"github.com/allocd/allocd/lock"
	"github.com/allocd/allocd/model"
	"github.com/allocd/allocd/registry"
)

// page is what every template gets.
type page struct {
	Name  string // the template: groups, group, plugins, topics, error
	Title string
	Admin bool
	Mode  Mode
	// Live is the page's own address, which /ui/events streams.
	Live string
	Data any
}

// historyLimit is how many generations a group page shows per topic.
const historyLimit = 20

// palette is how many owner colours the stylesheet has (.o0 to .o11).
const palette = 12

var funcs = template.FuncMap{
	"lag": func(v *int64) string {
		if v == nil {
			return "–"
		}
		return strconv.FormatInt(*v, 10)
	},
	"offset": func(v int64) string {
		if v < 0 {
			return "?"
		}
		return strconv.FormatInt(v, 10)
	},
	"time": func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"ptime": func(t *time.Time) string {
		if t == nil || t.IsZero() {
			return "–"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"rfc3339": func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
	"short":   shortHash,
	"trigger": coordinator.DescribeTrigger,
	"bytes": func(n int64) string {
		switch {
		case n >= 1<<20:
			return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
		case n >= 1<<10:
			return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
		}
		return fmt.Sprintf("%d B", n)
	},
	"join": strings.Join,
	"dur": func(d time.Duration) string {
		switch {
		case d >= time.Second:
			return fmt.Sprintf("%.2f s", d.Seconds())
		case d >= time.Millisecond:
			return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
		}
		return fmt.Sprintf("%d µs", d.Microseconds())
	},
	"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	},
	"colour": func(i int) int { return (i - 1) % palette },
	"query":  url.QueryEscape,
	"path":   url.PathEscape,
}

func shortHash(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// notFound is a page that does not exist.
var errNoPage = errors.New("no such page")

// load reads the data of the page at path.
func (u *UI) load(r *http.Request, path string, q url.Values) (page, error) {
	p := page{Admin: u.opts.Mode == Admin, Mode: u.opts.Mode, Live: path}
	if enc := q.Encode(); enc != "" {
		p.Live += "?" + enc
	}
	var err error
	switch rest, isGroup := strings.CutPrefix(path, "/ui/groups/"); {
	case path == "/ui/groups":
		p.Name, p.Title = "groups", "Groups"
		p.Data, err = u.groups(r, q)
	case isGroup && rest != "" && !strings.Contains(rest, "/"):
		p.Name, p.Title = "group", "Group "+rest
		p.Data, err = u.group(r, rest, q)
	case path == "/ui/plugins":
		p.Name, p.Title = "plugins", "Plugins"
		p.Data, err = u.plugins(r)
	case path == "/ui/topics":
		p.Name, p.Title = "topics", "Topics"
		p.Data, err = u.topics(r)
	default:
		err = errNoPage
	}
	return p, err
}

// servePage renders a whole page, or with ?fragment=1 only its live part.
func (u *UI) servePage(w http.ResponseWriter, r *http.Request) {
	p, err := u.load(r, r.URL.Path, r.URL.Query())
	status := http.StatusOK
	if err != nil {
		p, status = u.errorPage(p, r.URL.Path, err)
	}
	tmpl := "page"
	if r.URL.Query().Get("fragment") == "1" {
		tmpl = "live"
	}
	var buf bytes.Buffer
	if err := u.pages[p.Name].ExecuteTemplate(&buf, tmpl, p); err != nil {
		u.opts.Logger.Error().Err(err).Str("path", r.URL.Path).Msg("ui: rendering a page")
		http.Error(w, "rendering the page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

type errorData struct {
	Status int
	Path   string
	Msg    string
}

// errorPage turns a load's error into the error page and its status.
func (u *UI) errorPage(p page, path string, err error) (page, int) {
	status := http.StatusInternalServerError
	var ae *apiError
	switch {
	case errors.Is(err, errNoPage):
		status = http.StatusNotFound
		err = fmt.Errorf("no page %s: the pages are /ui/groups, /ui/groups/NAME, /ui/plugins and /ui/topics", path)
	case errors.As(err, &ae):
		status = ae.status
	}
	if status >= 500 {
		u.opts.Logger.Error().Err(err).Str("path", path).Msg("ui: loading a page")
	}
	p.Name, p.Title = "error", http.StatusText(status)
	p.Data = errorData{Status: status, Path: path, Msg: err.Error()}
	return p, status
}

// pluginVersions maps each plugin's name to its version serving.
func pluginVersions(list []registry.Status) map[string]string {
	out := map[string]string{}
	for _, s := range list {
		out[s.Name] = s.Version
	}
	return out
}

// ---- Groups

type groupsData struct {
	Query  string
	Sort   string
	Groups []groupRow
	Total  int
}

// groupRow is flat: templates look fields of embedded structs up by reflection at every use.
type groupRow struct {
	Name, Strategy, Version string
	Model                   model.Model
	Orderly                 bool
	Handoff                 model.HandoffMode
	State                   model.GroupState
	Members                 int
	Lag                     *int64
	Topics                  []topicGen
}

type topicGen struct {
	Name       string
	Generation int64
	State      model.GroupState
	Lag        *int64
}

func (u *UI) groups(r *http.Request, q url.Values) (groupsData, error) {
	var list struct{ Groups []model.GroupSummary }
	if err := u.get(r, "/v1/groups", &list); err != nil {
		return groupsData{}, err
	}
	var plugins struct{ Plugins []registry.Status }
	if err := u.get(r, "/v1/plugins", &plugins); err != nil {
		return groupsData{}, err
	}
	versions := pluginVersions(plugins.Plugins)
	d := groupsData{Query: q.Get("q"), Sort: q.Get("sort"), Total: len(list.Groups)}
	if d.Sort != "lag" {
		d.Sort = "name"
	}
	filter := strings.ToLower(d.Query)
	for _, g := range list.Groups {
		if filter != "" && !strings.Contains(strings.ToLower(g.Name), filter) {
			continue
		}
		row := groupRow{Name: g.Name, Strategy: g.Strategy, Version: versions[g.Strategy], Model: g.Model, Orderly: g.Orderly,
			Handoff: g.Handoff, State: g.State, Members: g.Members, Lag: g.Lag}
		if row.Handoff == "" {
			row.Handoff = model.HandoffCooperative
		}
		for _, name := range slices.Sorted(maps.Keys(g.Topics)) {
			t := g.Topics[name]
			row.Topics = append(row.Topics, topicGen{Name: name, Generation: t.Generation, State: t.State, Lag: t.Lag})
		}
		d.Groups = append(d.Groups, row)
	}
	if d.Sort == "lag" {
		slices.SortStableFunc(d.Groups, func(a, b groupRow) int { return compareLag(a.Lag, b.Lag) })
	}
	return d, nil
}

// compareLag orders the larger lag first, unknown lags last.
func compareLag(a, b *int64) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return 1
	case b == nil:
		return -1
	case *a > *b:
		return -1
	case *a < *b:
		return 1
	}
	return 0
}

// ---- A group

type groupData struct {
	model.GroupStatus
	View       string // grid or table
	Handoff    model.HandoffMode
	Members    []memberRow
	Owners     []owner
	Topics     []topicData
	Strategies []string
	ConfigText string // the binding's config, one key=value a line
}

type memberRow struct {
	model.MemberStatus
	Index  int
	Labels []label
	Held   []held
}

type label struct{ Key, Value string }

type held struct {
	Topic  string
	Queues int
}

// owner is a client id and its number on the page (colour and label of its cells).
type owner struct {
	CID   string
	Index int
	Live  bool
}

type topicData struct {
	Name       string
	Status     model.TopicStatus
	Topic      coordinator.TopicView
	TopicErr   string
	Width      []int // the grid's queue ids
	Rows       []gridRow
	Cells      []cell
	Unassigned int
	History    []model.HistoryEntry
	HistoryErr string
	Locks      []leaseRow
}

type gridRow struct {
	Broker string
	Cells  []cell // one per Width; Absent past the broker's read queues
}

type cell struct {
	Topic, Broker string
	QueueID       int32
	Absent        bool
	Owner         string
	Index         int // the owner's number, 0 when unassigned
	Offsets       *model.QueueLag
	Lock          string // the queue lock's holder (orderly groups)
}

type leaseRow struct {
	Lock    string
	Holder  string
	Token   uint64
	Expires time.Time
	Attempt int
}

func (u *UI) group(r *http.Request, name string, q url.Values) (groupData, error) {
	var s model.GroupStatus
	esc := url.PathEscape(name)
	if err := u.get(r, "/v1/groups/"+esc, &s); err != nil {
		return groupData{}, err
	}
	d := groupData{GroupStatus: s, View: q.Get("view"), Handoff: s.Handoff}
	if d.View != "table" {
		d.View = "grid"
	}
	if d.Handoff == "" {
		d.Handoff = model.HandoffCooperative
	}
	var plugins struct{ Plugins []registry.Status }
	if err := u.get(r, "/v1/plugins", &plugins); err != nil {
		return groupData{}, err
	}
	for _, p := range plugins.Plugins {
		if p.ActiveHash != "" {
			d.Strategies = append(d.Strategies, p.Name)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.Config)) {
		d.ConfigText += k + "=" + s.Config[k] + "\n"
	}
	// Owners: the live members by client id, then the owners in force that are gone.
	index := map[string]int{}
	for _, m := range s.Members {
		index[m.CID] = len(index) + 1
		d.Owners = append(d.Owners, owner{CID: m.CID, Index: index[m.CID], Live: true})
	}
	topicNames := slices.Sorted(maps.Keys(s.Topics))
	for _, t := range topicNames {
		for _, cid := range slices.Sorted(maps.Keys(s.Topics[t].Assignment)) {
			if _, ok := index[cid]; !ok {
				index[cid] = len(index) + 1
				d.Owners = append(d.Owners, owner{CID: cid, Index: index[cid]})
			}
		}
	}
	for _, m := range s.Members {
		row := memberRow{MemberStatus: m, Index: index[m.CID]}
		for _, k := range slices.Sorted(maps.Keys(m.Labels)) {
			row.Labels = append(row.Labels, label{k, m.Labels[k]})
		}
		for _, t := range topicNames {
			if n := len(s.Topics[t].Assignment[m.CID]); n > 0 {
				row.Held = append(row.Held, held{t, n})
			}
		}
		d.Members = append(d.Members, row)
	}
	var leases struct{ Locks []lockLease }
	if s.Orderly {
		if err := u.get(r, "/v1/groups/"+esc+"/locks", &leases); err != nil {
			return groupData{}, err
		}
	}
	for _, t := range topicNames {
		d.Topics = append(d.Topics, u.topicOfGroup(r, esc, t, s.Topics[t], index, leases.Locks))
	}
	return d, nil
}

type lockLease struct {
	Lock    lock.Lock
	Holder  string
	Token   uint64
	Expires time.Time
	Attempt int
}

func (u *UI) topicOfGroup(r *http.Request, group, name string, ts model.TopicStatus, index map[string]int, leases []lockLease) topicData {
	td := topicData{Name: name, Status: ts}
	if err := u.get(r, "/v1/topics/"+url.PathEscape(name), &td.Topic); err != nil {
		td.TopicErr = err.Error()
	}
	var h model.History
	if err := u.get(r, "/v1/groups/"+group+"/history?topic="+url.QueryEscape(name)+"&limit="+strconv.Itoa(historyLimit), &h); err != nil {
		td.HistoryErr = err.Error()
	}
	td.History = h.Entries
	owners := map[abi.Queue]string{}
	for cid, qs := range ts.Assignment {
		for _, q := range qs {
			owners[q] = cid
		}
	}
	offsets := map[abi.Queue]*model.QueueLag{}
	for i := range ts.Offsets {
		offsets[ts.Offsets[i].Queue] = &ts.Offsets[i]
	}
	locks := map[abi.Queue]string{}
	for _, l := range leases {
		if l.Lock.Kind == lock.KindQueue && l.Lock.Queue.Topic == name {
			q := abi.Queue{Topic: name, BrokerName: l.Lock.Queue.BrokerName, QueueID: int32(l.Lock.Queue.QueueID)}
			locks[q] = l.Holder
		}
		if l.Lock.Kind == lock.KindQueue && l.Lock.Queue.Topic == name || l.Lock.Kind == lock.KindMessageGroup && l.Lock.MessageGroup.Topic == name {
			td.Locks = append(td.Locks, leaseRow{Lock: l.Lock.String(), Holder: l.Holder, Token: l.Token, Expires: l.Expires, Attempt: l.Attempt})
		}
	}
	// The grid: the topic's brokers and read queues; queues of the generation that the topic
	// no longer has (or a topic that is gone) are added after them.
	queues := map[string]int{}
	var brokers []string
	for _, b := range td.Topic.Brokers {
		brokers = append(brokers, b.Name)
		queues[b.Name] = b.ReadQueues
	}
	for q := range owners {
		if _, ok := queues[q.BrokerName]; !ok {
			brokers = append(brokers, q.BrokerName)
		}
		queues[q.BrokerName] = max(queues[q.BrokerName], int(q.QueueID)+1)
	}
	width := 0
	for _, n := range queues {
		width = max(width, n)
	}
	for i := range width {
		td.Width = append(td.Width, i)
	}
	for _, b := range brokers {
		row := gridRow{Broker: b}
		for i := range width {
			q := abi.Queue{Topic: name, BrokerName: b, QueueID: int32(i)}
			c := cell{Topic: name, Broker: b, QueueID: int32(i), Absent: i >= queues[b]}
			if !c.Absent {
				c.Owner, c.Offsets, c.Lock = owners[q], offsets[q], locks[q]
				c.Index = index[c.Owner]
				if c.Owner == "" {
					td.Unassigned++
				}
				td.Cells = append(td.Cells, c)
			}
			row.Cells = append(row.Cells, c)
		}
		td.Rows = append(td.Rows, row)
	}
	return td
}

// ---- Plugins

type pluginsData struct {
	Plugins []pluginRow
}

type pluginRow struct {
	plugin
	Groups []string
}

// plugin is an entry of GET /v1/plugins: the registry's status, the daemon's calls to the
// plugin and the harness's report on the version serving.
type plugin struct {
	registry.Status
	Allocate *model.PluginCalls `json:"allocate"`
	Harness  *model.CheckReport `json:"harness"`
}

func (u *UI) plugins(r *http.Request) (pluginsData, error) {
	var plugins struct{ Plugins []plugin }
	if err := u.get(r, "/v1/plugins", &plugins); err != nil {
		return pluginsData{}, err
	}
	var list struct{ Groups []model.GroupSummary }
	if err := u.get(r, "/v1/groups", &list); err != nil {
		return pluginsData{}, err
	}
	users := map[string][]string{}
	for _, g := range list.Groups {
		users[g.Strategy] = append(users[g.Strategy], g.Name)
	}
	var d pluginsData
	for _, p := range plugins.Plugins {
		slices.Reverse(p.History) // newest first
		d.Plugins = append(d.Plugins, pluginRow{plugin: p, Groups: users[p.Name]})
	}
	return d, nil
}

// ---- Topics

type topicsData struct {
	Topics []topicRow
}

type topicRow struct {
	coordinator.TopicView
	Err    string
	Groups []string
	Read   int
	Write  int
}

func (u *UI) topics(r *http.Request) (topicsData, error) {
	var list struct{ Topics []model.Topic }
	if err := u.get(r, "/v1/topics", &list); err != nil {
		return topicsData{}, err
	}
	var groups struct{ Groups []model.GroupSummary }
	if err := u.get(r, "/v1/groups", &groups); err != nil {
		return topicsData{}, err
	}
	readers := map[string][]string{}
	for _, g := range groups.Groups {
		for t := range g.Topics {
			readers[t] = append(readers[t], g.Name)
		}
	}
	var d topicsData
	for _, t := range list.Topics {
		row := topicRow{TopicView: coordinator.TopicView{Topic: t}, Groups: readers[t.Name]}
		if t.Autoscale != nil {
			if err := u.get(r, "/v1/topics/"+url.PathEscape(t.Name), &row.TopicView); err != nil {
				row.Err = err.Error()
			}
		}
		for _, b := range row.Brokers {
			row.Read += b.ReadQueues
			row.Write += b.WriteQueues
		}
		d.Topics = append(d.Topics, row)
	}
	return d, nil
}
