package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/allocd/allocd/harness"
	"github.com/allocd/allocd/host"
)

func init() {
	register(command{"check", "prove a plugin sound with generated scenarios", runCheck})
}

func runCheck(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seed := fs.Uint64("seed", 1, "seed of the generated scenarios")
	scenarios := fs.Int("scenarios", 40, "number of generated scenarios")
	reference := fs.String("reference", "", "compare every answer with this plugin (NAME or PATH.wasm)")
	vectors := fs.String("vectors", "", "compare with the recorded RocketMQ vectors of this JSON-lines file")
	strategy := fs.String("strategy", "", "vector strategy: AVG, AVG_BY_CIRCLE or CONSISTENT_HASH (default: from the plugin's name)")
	jsonOut := fs.Bool("json", false, "write the report as JSON")
	pluginsDir := fs.String("plugins-dir", defaultPluginsDir(), "folder of NAME.wasm plugins, looked in before the built-ins")
	cacheDir := fs.String("cache-dir", defaultCacheDir(), "compiled-code cache folder (\"\" for none)")
	timeout := fs.Duration("timeout", host.DefaultTimeout, "deadline of each plugin call")
	instances := fs.Int("instances", 4, "instances per plugin (the determinism check calls several at once)")
	stability := fs.String("stability-size", "", "QxC: measure queue movement on --scenarios groups of exactly Q queues and C consumers")
	logLevel := fs.String("log-level", "error", "log level of plugin and host messages on stderr")
	config := configFlag{}
	fs.Var(config, "config", "binding config key=value for every request (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: allocd check PLUGIN [flags]

Checks a strategy plugin (NAME in --plugins-dir, or PATH.wasm) over generated consumer groups: no
failed calls, no queue given to two consumers, every queue given to someone (unless the plugin
declares "partial"), the same answer to the same request on any instance and in any order, balance
when it promises "balanced", no queue moved between remaining consumers on a join or leave when it
promises "sticky"; and reports queue movement, latency and memory. Exits 1 when a check fails,
printing the smallest scenario that shows each failure.`)
		fs.PrintDefaults()
	}
	// Flags may come before or after PLUGIN.
	positional, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(positional) == 0:
		return usageErr("name the plugin to check: allocd check NAME|PATH.wasm")
	case len(positional) > 1:
		return usageErr("unexpected arguments %q", positional[1:])
	case *scenarios < 1:
		return usageErr("--scenarios must be at least 1")
	case *instances < 1:
		return usageErr("--instances must be at least 1")
	}
	opts := harness.Options{Seed: *seed, Scenarios: *scenarios, Config: config, Vectors: *vectors, Strategy: strings.ToUpper(*strategy)}
	if *stability != "" {
		q, c, ok := strings.Cut(*stability, "x")
		nq, err1 := strconv.Atoi(q)
		nc, err2 := strconv.Atoi(c)
		if !ok || err1 != nil || err2 != nil || nq < 1 || nc < 1 {
			return usageErr("--stability-size %q: want QxC, such as 256x16", *stability)
		}
		opts.StabilityQueues, opts.StabilityConsumers = nq, nc
	}
	switch opts.Strategy {
	case "", harness.StrategyAvg, harness.StrategyAvgByCircle, harness.StrategyConsistentHash:
	default:
		return usageErr("--strategy %q: want AVG, AVG_BY_CIRCLE or CONSISTENT_HASH", *strategy)
	}

	log, err := newLogger(stderr, *logLevel, false)
	if err != nil {
		return err
	}
	rt, err := host.NewRuntime(ctx, host.Config{CacheDir: *cacheDir, Timeout: *timeout, Logger: log, MaxInstances: *instances})
	if err != nil {
		return err
	}
	defer rt.Close(context.Background())
	load := func(arg string) (*host.Plugin, string, error) {
		name, wasm, err := readPlugin(arg, *pluginsDir)
		if err != nil {
			return nil, "", err
		}
		p, err := rt.Load(ctx, name, wasm)
		return p, name, err
	}
	p, name, err := load(positional[0])
	if err != nil {
		return err
	}
	defer p.Close(context.Background())
	if *reference != "" {
		ref, _, err := load(*reference)
		if err != nil {
			return fmt.Errorf("--reference: %w", err)
		}
		defer ref.Close(context.Background())
		opts.Reference = ref
	}
	if opts.Vectors != "" && opts.Strategy == "" && harness.StrategyFor(p.Info().Name) == "" {
		opts.Strategy = harness.StrategyFor(name) // the file name, when the self-description does not tell
	}

	rep, err := harness.Run(ctx, p, opts)
	if err != nil {
		return err
	}
	s := p.Stats()
	rep.Host = []harness.Counter{
		{Name: "calls", Value: s.Calls}, {Name: "failed as a whole", Value: s.Failures},
		{Name: "answers refused by the host's checks", Value: s.Invalid},
		{Name: "traps", Value: s.Traps}, {Name: "timeouts", Value: s.Timeouts},
		{Name: "instances live", Value: s.Instances}, {Name: "started after the load", Value: s.Created},
		{Name: "discarded", Value: s.Discarded}, {Name: "KiB of linear memory", Value: s.MemoryBytes >> 10},
	}
	if *jsonOut {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		return err
	}
	if !rep.Passed() {
		return errFailed
	}
	return nil
}
