package registry

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

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
		if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
			r.folderGone(ev.Op)
		}
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

// folderGone stops watching a plugin folder that was removed or renamed (a watch on a renamed
// folder would follow it to its new name) and looks for the folder to come back every
// FolderPoll: deploy scripts replace the folder with rm -rf and mkdir, volumes are remounted.
// Meanwhile the plugins in use keep serving; the others unload as their files' events say.
func (r *Registry) folderGone(op fsnotify.Op) {
	if !r.polling.CompareAndSwap(false, true) {
		return
	}
	r.wmu.Lock()
	r.watcher.Remove(r.dir) // gone already when the folder was removed
	r.wmu.Unlock()
	r.log.Warn().Str("dir", r.dir).Str("op", op.String()).Dur("poll", r.opts.FolderPoll).
		Msg("plugin folder removed or renamed; watching for it to come back")
	time.AfterFunc(r.opts.FolderPoll, r.pollFolder)
}

// pollFolder watches the folder again once it is back, and rescans it.
func (r *Registry) pollFolder() {
	if r.closed() {
		return
	}
	if fi, err := os.Stat(r.dir); err == nil && fi.IsDir() {
		r.wmu.Lock()
		err = errors.New("registry closed")
		if !r.closed() {
			err = r.watcher.Add(r.dir)
		}
		r.wmu.Unlock()
		if err == nil {
			r.polling.Store(false)
			r.log.Info().Str("dir", r.dir).Msg("plugin folder is back; watching it and loading its plugins")
			r.enqueue(keyRescan)
			return
		}
		if r.closed() {
			return
		}
		r.log.Warn().Err(err).Str("dir", r.dir).Msg("watching the plugin folder again")
	}
	time.AfterFunc(r.opts.FolderPoll, r.pollFolder)
}
