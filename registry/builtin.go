package registry

import (
	"io/fs"
	"slices"
	"strings"

	"github.com/allocd/allocd/host"
)

// Built-in plugins (Options.Builtins) sit under the folder: NAME.wasm in the folder, when there
// is one, serves NAME, and otherwise the built-in NAME does. So a file dropped into the folder
// overrides a built-in through an ordinary reload, removing the file reloads the built-in, and a
// file that fails to load leaves the built-in serving, or brings it in when nothing serves yet
// (the status keeps the file's error).

// builtinNames lists the built-in plugins.
func (r *Registry) builtinNames() []string {
	if r.opts.Builtins == nil {
		return nil
	}
	files, err := fs.Glob(r.opts.Builtins, "*.wasm")
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(files))
	for _, f := range files {
		if name, ok := pluginName(f); ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// builtin returns the module of built-in plugin name.
func (r *Registry) builtin(name string) ([]byte, bool) {
	if r.opts.Builtins == nil || strings.ContainsAny(name, `/\`) {
		return nil, false
	}
	b, err := fs.ReadFile(r.opts.Builtins, name+".wasm")
	if err != nil || len(b) == 0 {
		return nil, false
	}
	return b, true
}

// builtinFallback runs after the folder's file of name was rejected: when no version of name
// serves and there is a built-in of that name, the built-in serves. The rejected file stays
// rejected (it is not tried again until it changes) and its error stays in the status.
func (r *Registry) builtinFallback(name, outcome string) string {
	e := (*r.entries.Load())[name]
	if e == nil || e.active.Load() != nil {
		return outcome
	}
	b, ok := r.builtin(name)
	if !ok {
		return outcome
	}
	failedHash := e.failedHash
	r.mu.Lock()
	attempt, attemptHash, lastError, rejected, retryAt := e.lastAttempt, e.lastAttemptHash, e.lastError, e.rejected, e.retryAt
	r.mu.Unlock()
	out, fail := r.load(e, b, host.Hash(b), true)
	e.failedHash = failedHash
	if fail != nil {
		// No timer of its own tries it again: a retry of the file's version (after a deadline,
		// which stays due) or a Rescan does. The file's rejection stays what the status names;
		// the built-in's failure is the last attempt, and the warning adds it.
		r.reject(e, fail.hash, "built-in "+fail.stage, fail.err, fail.attempt, fail.took, 0)
		r.mu.Lock()
		if rejected != nil {
			e.rejected = rejected
		}
		e.retryAt, e.builtinErr = retryAt, e.lastError
		r.mu.Unlock()
		return outFailed
	}
	r.mu.Lock()
	e.lastAttempt, e.lastAttemptHash, e.lastError, e.rejected = attempt, attemptHash, lastError, rejected
	r.mu.Unlock()
	r.log.Warn().Str("plugin", name).Str("file", e.file).Str("reason", lastError).
		Msg("the plugin file was rejected; the built-in plugin of that name serves")
	return out
}
