package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/host"
)

func init() {
	register(command{"allocate", "answer JSON Lines allocation requests on stdin with a plugin", runAllocate})
}

// allocateLine is one request line. Fields it does not know (a vector file's strategy, result,
// ...) are ignored, so recorded vectors can be fed as they are.
type allocateLine struct {
	Group  string      `json:"group"`
	CID    *string     `json:"cid"`
	MQAll  []abi.Queue `json:"mqAll"`
	CIDAll []string    `json:"cidAll"`
	// QueueLabels and ConsumerLabels are parallel to MQAll and CIDAll: each an object of labels,
	// or null for none.
	QueueLabels    []map[string]json.RawMessage `json:"queueLabels"`
	ConsumerLabels []map[string]json.RawMessage `json:"consumerLabels"`
	// PrevOwners is parallel to MQAll: the index into CIDAll of each queue's previous owner, or -1.
	PrevOwners []int `json:"prevOwners"`
	// Config is an object merged over --config (a null value removes the key). A JSON array
	// here is a vector file's CONFIG list, not a binding config, and is ignored.
	Config json.RawMessage `json:"config"`
}

// jsonText is a label or config value as the plugin gets it: a JSON string is its text, any other
// JSON value (an array, a number) its compact JSON text; ok is false for null.
func jsonText(raw json.RawMessage) (text string, ok bool, err error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", false, nil
	case raw[0] == '"':
		err = json.Unmarshal(raw, &text)
		return text, err == nil, err
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "", false, err
	}
	return b.String(), true, nil
}

// attrs turns a line's labels into request attributes: nil for an absent field, else one
// entry per element, which must match the count of what they are parallel to.
func attrs(labels []map[string]json.RawMessage, n int, field, of string) ([]abi.Attrs, error) {
	if labels == nil {
		return nil, nil
	}
	if len(labels) != n {
		return nil, fmt.Errorf("%q has %d entries for %d %s", field, len(labels), n, of)
	}
	out := make([]abi.Attrs, n)
	for i, m := range labels {
		for k, raw := range m {
			text, ok, err := jsonText(raw)
			if err != nil {
				return nil, fmt.Errorf("%s[%d].%s: %v", field, i, k, err)
			}
			if !ok {
				continue
			}
			if out[i].Labels == nil {
				out[i].Labels = make(map[string]string, len(m))
			}
			out[i].Labels[k] = text
		}
	}
	return out, nil
}

// request builds the line's request over the --config settings.
func (l *allocateLine) request(config map[string]string) (*abi.Request, error) {
	req := &abi.Request{Group: l.Group, Queues: l.MQAll, Consumers: l.CIDAll, Config: config}
	var err error
	if req.QueueAttrs, err = attrs(l.QueueLabels, len(l.MQAll), "queueLabels", "queues in mqAll"); err != nil {
		return nil, err
	}
	if req.ConsumerAttrs, err = attrs(l.ConsumerLabels, len(l.CIDAll), "consumerLabels", "consumers in cidAll"); err != nil {
		return nil, err
	}
	if l.PrevOwners != nil {
		if len(l.PrevOwners) != len(l.MQAll) {
			return nil, fmt.Errorf(`"prevOwners" has %d entries for %d queues in mqAll`, len(l.PrevOwners), len(l.MQAll))
		}
		req.PrevOwners = make([]string, len(l.PrevOwners))
		for i, o := range l.PrevOwners {
			switch {
			case o == -1:
			case o < 0 || o >= len(l.CIDAll):
				return nil, fmt.Errorf("prevOwners[%d] is %d: not -1 nor an index into cidAll [0,%d)", i, o, len(l.CIDAll))
			default:
				req.PrevOwners[i] = l.CIDAll[o]
			}
		}
	}
	if raw := bytes.TrimSpace(l.Config); len(raw) > 0 && raw[0] != '[' && string(raw) != "null" {
		var own map[string]json.RawMessage
		if err := json.Unmarshal(raw, &own); err != nil {
			return nil, fmt.Errorf(`"config" is not an object: %v`, err)
		}
		req.Config = make(map[string]string, len(config)+len(own))
		for k, v := range config {
			req.Config[k] = v
		}
		for k, raw := range own {
			text, ok, err := jsonText(raw)
			switch {
			case err != nil:
				return nil, fmt.Errorf("config.%s: %v", k, err)
			case ok:
				req.Config[k] = text
			default:
				delete(req.Config, k)
			}
		}
	}
	if l.CID != nil {
		req.Targets = []string{*l.CID}
	}
	return req, nil
}

// The three shapes of an answer line.
type (
	resultAnswer struct {
		Result []abi.Queue `json:"result"`
	}
	assignmentAnswer struct {
		Assignment map[string][]abi.Queue `json:"assignment"`
	}
	errorAnswer struct {
		Error string `json:"error"`
		// Errors names each failed consumer of a whole-group request, and Assignment gives
		// the others' queues.
		Errors     map[string]string      `json:"errors,omitempty"`
		Assignment map[string][]abi.Queue `json:"assignment,omitempty"`
	}
)

func runAllocate(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("allocate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pluginArg := fs.String("plugin", "", "plugin NAME (in --plugins-dir, else built in) or PATH.wasm")
	pluginsDir := fs.String("plugins-dir", defaultPluginsDir(), "folder of NAME.wasm plugins, looked in before the built-ins")
	cacheDir := fs.String("cache-dir", defaultCacheDir(), "compiled-code cache folder (\"\" for none)")
	timeout := fs.Duration("timeout", host.DefaultTimeout, "deadline of each plugin call")
	logLevel := fs.String("log-level", "warn", "log level of plugin and host messages on stderr")
	keepGoing := fs.Bool("keep-going", false, "exit 0 even when lines failed (their answers still say why)")
	config := configFlag{}
	fs.Var(config, "config", "binding config key=value for every request (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: allocd allocate --plugin NAME|PATH.wasm [--config key=value]... [--keep-going] < requests.jsonl

Reads one JSON request per line, {"group":"g","cid":"c1","mqAll":[{"topic":"T","brokerName":"b","queueId":0}],"cidAll":["c1","c2"]},
and writes one JSON line per request, in order: {"result":[queues]} or {"error":"..."}; without "cid",
the whole group: {"assignment":{"c1":[...],...}}. Optional fields: "queueLabels" and "consumerLabels"
(parallel to mqAll and cidAll, each an object of labels or null), "prevOwners" (parallel to mqAll,
an index into cidAll or -1) and "config" (an object over the --config keys; null removes a key).
A label or config value that is not a string is passed on as its JSON text.
Every line is answered; the exit status is 1 when a line failed to parse or the plugin failed on
it, unless --keep-going.`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments %q", fs.Args())
	}
	name, wasm, err := readPlugin(*pluginArg, *pluginsDir)
	if err != nil {
		return err
	}
	log, err := newLogger(stderr, *logLevel, false)
	if err != nil {
		return err
	}
	rt, err := host.NewRuntime(ctx, host.Config{CacheDir: *cacheDir, Timeout: *timeout, Logger: log, MaxInstances: 1})
	if err != nil {
		return err
	}
	defer rt.Close(context.Background())
	p, err := rt.Load(ctx, name, wasm)
	if err != nil {
		return err
	}
	defer p.Close(context.Background())

	in := bufio.NewReaderSize(stdin, 1<<20)
	out := bufio.NewWriterSize(stdout, 1<<16)
	defer out.Flush()
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	lines, failed, firstFailure := 0, 0, ""
	done := func() error {
		if failed == 0 || *keepGoing {
			return nil
		}
		if err := out.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "allocd allocate: %d of %d lines failed; the first: %s\n", failed, lines, firstFailure)
		return errFailed
	}
	for lineNo := 1; ; lineNo++ {
		// Flush before blocking on input, so a program that drives allocd line by line gets
		// each answer as soon as it is computed.
		if in.Buffered() == 0 {
			if err := out.Flush(); err != nil {
				return err
			}
		}
		line, rerr := in.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			ans := answerLine(ctx, p, config, line, lineNo)
			lines++
			if e, ok := ans.(errorAnswer); ok {
				if failed == 0 {
					firstFailure = fmt.Sprintf("line %d: %s", lineNo, strings.TrimPrefix(e.Error, fmt.Sprintf("line %d: ", lineNo)))
				}
				failed++
			}
			if err := enc.Encode(ans); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			return done()
		}
		if rerr != nil {
			return rerr
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

func answerLine(ctx context.Context, p *host.Plugin, config map[string]string, line []byte, lineNo int) any {
	var l allocateLine
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&l); err != nil {
		return errorAnswer{Error: fmt.Sprintf("line %d: invalid request: %v", lineNo, err)}
	}
	if dec.More() {
		return errorAnswer{Error: fmt.Sprintf("line %d: invalid request: more than one JSON value", lineNo)}
	}
	req, err := l.request(config)
	if err != nil {
		return errorAnswer{Error: fmt.Sprintf("line %d: invalid request: %v", lineNo, err)}
	}
	resp, err := p.Allocate(ctx, req)
	if err != nil {
		return errorAnswer{Error: err.Error()}
	}
	queuesOf := func(r abi.Result) []abi.Queue {
		qs := make([]abi.Queue, len(r.Indices))
		for i, x := range r.Indices {
			qs[i] = req.Queues[x]
		}
		return qs
	}
	if l.CID != nil {
		r := resp.Results[0]
		if r.Failed {
			return errorAnswer{Error: r.Err}
		}
		return resultAnswer{Result: queuesOf(r)}
	}
	a := assignmentAnswer{Assignment: make(map[string][]abi.Queue, len(resp.Results))}
	var failed errorAnswer
	var failures []error
	for i, r := range resp.Results {
		cid := req.Target(i)
		if r.Failed {
			if failed.Errors == nil {
				failed.Errors = map[string]string{}
			}
			failed.Errors[cid] = r.Err
			failures = append(failures, fmt.Errorf("consumer %q: %s", cid, r.Err))
			continue
		}
		a.Assignment[cid] = queuesOf(r)
	}
	if len(failures) > 0 {
		failed.Error = errors.Join(failures...).Error()
		failed.Assignment = a.Assignment
		return failed
	}
	return a
}
