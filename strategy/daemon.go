package strategy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/allocd/allocd/client"
	"github.com/allocd/allocd/host"
	"github.com/allocd/allocd/registry"
)

// daemonSource keeps a folder holding the last good module of one daemon's plugin, which the
// strategy's registry watches: a module fetched from the daemon is checked (registry.Check)
// before it is written there, with an atomic rename, so the folder never holds a module that
// failed, and a restart without the daemon finds the last good one.
type daemonSource struct {
	cfg      Config
	rt       *host.Runtime
	c        *client.Client
	log      zerolog.Logger
	dir      string
	file     string
	onFailed func(Event)
	// rejected is the hash of the last module that failed its checks, not checked again.
	rejected string
}

func newDaemonSource(cfg Config, rt *host.Runtime, log zerolog.Logger) *daemonSource {
	var opts []client.Option
	if cfg.HTTPClient != nil {
		opts = append(opts, client.WithHTTPClient(cfg.HTTPClient))
	}
	dir := cacheFolder(cfg.CacheDir, cfg.Daemon)
	return &daemonSource{
		cfg: cfg, rt: rt, c: client.New(cfg.Daemon, opts...),
		log: log.With().Str("daemon", cfg.Daemon).Str("plugin", cfg.Name).Logger(),
		dir: dir, file: filepath.Join(dir, cfg.Name+".wasm"),
	}
}

// prime fetches the version in force before the registry starts. When the daemon cannot be
// reached, or serves a module that fails its checks, the cached module serves, if there is
// one; otherwise there is nothing to serve and that is the error.
func (d *daemonSource) prime(ctx context.Context) error {
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return fmt.Errorf("strategy: module cache: %w", err)
	}
	m, err := d.c.Module(ctx, d.cfg.Name, "", 0)
	if err == nil {
		err = d.accept(ctx, m)
	}
	if err == nil {
		return nil
	}
	if _, serr := os.Stat(d.file); serr == nil {
		d.log.Warn().Err(err).Str("cached", d.file).Msg("using the cached module")
		return nil
	}
	return fmt.Errorf("strategy: plugin %q from %s: %w (and no module cached in %s)", d.cfg.Name, d.cfg.Daemon, err, d.dir)
}

// accept checks a module fetched from the daemon and, if it passes, makes it the cached one.
func (d *daemonSource) accept(ctx context.Context, m *client.Module) error {
	if cur, err := os.ReadFile(d.file); err == nil && host.Hash(cur) == m.Hash {
		return nil
	}
	if m.Hash == d.rejected {
		return fmt.Errorf("module %s was rejected before", short(m.Hash))
	}
	err := registry.Check(ctx, d.rt, d.cfg.Name, m.Wasm, d.cfg.Validate)
	if err != nil {
		d.rejected = m.Hash
		d.log.Error().Err(err).Str("hash", short(m.Hash)).Msg("module from the daemon rejected; the last good one keeps serving")
		if d.onFailed != nil {
			d.onFailed(Event{Name: d.cfg.Name, Kind: registry.Failed, Hash: m.Hash, Err: err.Error(), Time: time.Now()})
		}
		return fmt.Errorf("module %s: %w", short(m.Hash), err)
	}
	if err := writeFile(d.file, m.Wasm); err != nil {
		return fmt.Errorf("caching module %s: %w", short(m.Hash), err)
	}
	d.log.Info().Str("hash", short(m.Hash)).Msg("module from the daemon accepted")
	return nil
}

// run long-polls the daemon for the next version until ctx ends. current is the hash serving.
func (d *daemonSource) run(ctx context.Context, current func() string) {
	after := current()
	down := false
	for ctx.Err() == nil {
		m, err := d.c.Module(ctx, d.cfg.Name, after, d.cfg.PollWait)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if !down {
				d.log.Warn().Err(err).Msg("fetching the module from the daemon failed; the last good one keeps serving")
				down = true
			}
			if !sleep(ctx, d.cfg.RetryInterval) {
				return
			}
			continue
		}
		if down {
			d.log.Info().Msg("daemon reachable again")
			down = false
		}
		// Wait for the version after the one the daemon serves, good or not: a rejected
		// version is not fetched again and again.
		after = m.Hash
		if m.Changed {
			d.accept(ctx, m)
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// writeFile replaces path with data atomically: a reader (the registry, another process) sees
// the old file or the new one, never a part.
func writeFile(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}
