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

	"github.com/allocd/allocd/abi"
	"github.com/allocd/allocd/host"
)

func init() {
	register(command{"allocate", "answer JSON Lines allocation requests on stdin with a plugin", runAllocate})
}

// allocateLine is one request line. Fields it does not know (a vector file's strategy, result,
// ...) are ignored, so recorded vectors can be fed as they are.
type allocateLine struct {
	Group  string            `json:"group"`
	CID    *string           `json:"cid"`
	MQAll  []abi.Queue       `json:"mqAll"`
	CIDAll []string          `json:"cidAll"`
	Config map[string]string `json:"config"`
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
		// Errors names each failed consumer of a whole-group request.
		Errors map[string]string `json:"errors,omitempty"`
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
	config := configFlag{}
	fs.Var(config, "config", "binding config key=value for every request (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: allocd allocate --plugin NAME|PATH.wasm [--config key=value]... < requests.jsonl

Reads one JSON request per line, {"group":"g","cid":"c1","mqAll":[{"topic":"T","brokerName":"b","queueId":0}],"cidAll":["c1","c2"]},
and writes one JSON line per request, in order: {"result":[queues]} or {"error":"..."}; without "cid",
the whole group: {"assignment":{"c1":[...],...}}. A line's own "config" object overrides --config keys.`)
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
			if err := enc.Encode(answerLine(ctx, p, config, line, lineNo)); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			return nil
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
	req := &abi.Request{Group: l.Group, Queues: l.MQAll, Consumers: l.CIDAll, Config: config}
	if len(l.Config) > 0 {
		req.Config = make(map[string]string, len(config)+len(l.Config))
		for k, v := range config {
			req.Config[k] = v
		}
		for k, v := range l.Config {
			req.Config[k] = v
		}
	}
	if l.CID != nil {
		req.Targets = []string{*l.CID}
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
		return failed
	}
	return a
}
