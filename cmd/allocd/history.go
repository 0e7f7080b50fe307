package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/allocd/allocd/client"
	"github.com/allocd/allocd/coordinator"
)

func init() {
	register(command{"history", "print a (group, topic)'s generations: when, why, by which plugin, what moved", runHistory})
	register(command{"explain", "print one queue's owners over the retained history, and why each change", runExplain})
}

// daemonFlags are the flags of the commands that ask a running daemon.
type daemonFlags struct {
	addr, group, topic string
	json               bool
	timeout            time.Duration
}

func (f *daemonFlags) register(fs *flag.FlagSet) {
	addr := os.Getenv("ALLOCD_ADDR")
	if addr == "" {
		addr = defaultListen
	}
	fs.StringVar(&f.addr, "addr", addr, "the daemon's address or URL ($ALLOCD_ADDR)")
	fs.StringVar(&f.group, "group", "", "consumer group (required)")
	fs.StringVar(&f.topic, "topic", "", "topic (required)")
	fs.BoolVar(&f.json, "json", false, "print the daemon's JSON answer instead of a table")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "bound on the request")
}

func (f *daemonFlags) check() error {
	if f.group == "" || f.topic == "" {
		return usageErr("--group and --topic are required")
	}
	return nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func runHistory(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("history", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f daemonFlags
	f.register(fs)
	limit := fs.Int("limit", 20, fmt.Sprintf("generations to print, newest first (at most %d)", coordinator.MaxHistoryPage))
	before := fs.Int64("before", 0, "print generations older than this one (0: from the newest)")
	moves := fs.Bool("moves", false, "print every move under its generation")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	h, err := client.New(f.addr).History(ctx, f.group, f.topic, *limit, *before)
	if err != nil {
		return err
	}
	if f.json {
		return printJSON(stdout, h)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GEN\tAT\tTRIGGER\tPLUGIN\tMEMBERS\tMOVED\tHELD BACK")
	for _, e := range h.Entries {
		plugin := "-"
		if e.Plugin != "" {
			plugin = e.Plugin + " " + shortHash(e.PluginVersion)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%d\t%d\n", e.Generation, e.At.UTC().Format(time.RFC3339), coordinator.DescribeTrigger(e.Trigger),
			plugin, e.Members, len(e.Moves), len(e.Pending))
		if *moves {
			for _, m := range e.Moves {
				fmt.Fprintf(tw, "\t\t  %s: %s -> %s\t\t\t\t\n", m.Queue, who(m.From), who(m.To))
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(h.Entries) == 0 {
		fmt.Fprintf(stdout, "no generations of topic %s in group %s\n", f.topic, f.group)
	}
	if h.Next > 0 {
		fmt.Fprintf(stdout, "older: allocd history --group %s --topic %s --before %d\n", f.group, f.topic, h.Next)
	}
	return nil
}

func runExplain(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f daemonFlags
	f.register(fs)
	broker := fs.String("broker", "", "broker name of the queue (required)")
	queue := fs.Int("queue", -1, "queue id (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	if *broker == "" || *queue < 0 {
		return usageErr("--broker and --queue are required")
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	ex, err := client.New(f.addr).Explain(ctx, f.group, client.Queue{Topic: f.topic, BrokerName: *broker, QueueID: int32(*queue)})
	if err != nil {
		return err
	}
	if f.json {
		return printJSON(stdout, ex)
	}
	fmt.Fprintf(stdout, "queue %s of group %s: owner %s at generation %d (history kept from generation %d)\n",
		ex.Queue, ex.Group, who(ex.Owner), ex.Generation, ex.Oldest)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GEN\tAT\tFROM\tTO\tWHY")
	for _, ch := range ex.Changes {
		to := who(ch.To)
		if ch.PendingTo != "" {
			to += " (held back for " + ch.PendingTo + ")"
		}
		why := coordinator.DescribeTrigger(ch.Trigger)
		if ch.Plugin != "" {
			why += "; " + ch.Plugin + " " + shortHash(ch.PluginVersion)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", ch.Generation, ch.At.UTC().Format(time.RFC3339), who(ch.From), to, why)
	}
	return tw.Flush()
}

func who(cid string) string {
	if cid == "" {
		return "nobody"
	}
	return cid
}

func shortHash(v string) string {
	v = strings.TrimPrefix(v, "sha256:")
	if len(v) > 12 {
		return v[:12]
	}
	return v
}
