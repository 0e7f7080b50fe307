package registry

import (
	"context"
	"errors"
	"path/filepath"
	"strings"

	"github.com/fsnotify/fsnotify"
)

// Run applies the folder's changes until ctx ends (it then returns nil) or the registry is
// closed, and closes the registry on its way out. Run may be called once.
func (r *Registry) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return errors.New("registry: Run called twice")
	}
	defer r.Close()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.stop:
			return ErrClosed
		case ev, ok := <-r.watcher.Events:
			if !ok {
				return ErrClosed
			}
			r.handle(ev)
		case err, ok := <-r.watcher.Errors:
			if !ok {
				return ErrClosed
			}
			r.log.Warn().Err(err).Str("dir", r.dir).Msg("watching plugin folder")
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				r.changed(keyRescan) // events were lost: look at everything
			}
		}
	}
}

// handle debounces one event into a check of the plugin it concerns, or a rescan.
func (r *Registry) handle(ev fsnotify.Event) {
	if filepath.Clean(ev.Name) == r.dir {
		r.log.Warn().Str("dir", r.dir).Str("op", ev.Op.String()).Msg("plugin folder itself changed")
		return
	}
	base := filepath.Base(ev.Name)
	if strings.HasPrefix(base, "..") {
		// A Kubernetes ConfigMap swaps its ..data symlink to a new ..<timestamp> folder:
		// every NAME.wasm -> ..data/NAME.wasm may have changed without an event of its own.
		r.changed(keyRescan)
		return
	}
	if name, ok := r.pluginName(base); ok {
		r.changed(name)
	}
}
