package registry

import (
	"sync"
	"time"
)

// EventKind says what happened to a plugin.
type EventKind string

// The kinds of Event.
const (
	// Loaded: a plugin name got its first serving version.
	Loaded EventKind = "loaded"
	// Reloaded: a new version replaced the serving one.
	Reloaded EventKind = "reloaded"
	// Failed: a new version was rejected; the previous one (if any) keeps serving.
	Failed EventKind = "failed"
	// Gone: the file was removed while the plugin is still used; its last version keeps
	// serving.
	Gone EventKind = "gone"
	// Removed: the plugin was unloaded; calls to it now fail with ErrNotFound.
	Removed EventKind = "removed"
	// Restored: the plugin's file holds the version serving again, after it was rejected,
	// removed or served from the Keeper.
	Restored EventKind = "restored"
)

// Event reports a change of a plugin's serving version, so that a coordinator can recompute the
// assignments that depend on it.
type Event struct {
	Name string    `json:"name"`
	Kind EventKind `json:"kind"`
	// Hash is the content hash of the version concerned: the new one for Loaded, Reloaded and
	// Failed, the last one for Gone and Removed.
	Hash string `json:"hash"`
	// Version is the plugin's self-described version ("" for Failed).
	Version string `json:"version,omitempty"`
	// Err is why a Failed version was rejected.
	Err string `json:"err,omitempty"`
	// Kept marks a Loaded version read from Options.Keeper, not from the plugin's file.
	Kept bool      `json:"kept,omitempty"`
	Time time.Time `json:"time"`
}

// Subscribe returns a channel that receives every later Event, in order, and a function that
// ends the subscription (and closes the channel). Events are queued for a slow reader, never
// dropped and never blocking the registry. The channel is closed when the registry closes.
func (r *Registry) Subscribe() (<-chan Event, func()) {
	s := &subscriber{wake: make(chan struct{}, 1), out: make(chan Event), done: make(chan struct{})}
	r.smu.Lock()
	if r.subs == nil { // closed
		r.smu.Unlock()
		close(s.out)
		return s.out, func() {}
	}
	r.subs[s] = struct{}{}
	r.smu.Unlock()
	go s.pump()
	return s.out, func() {
		r.smu.Lock()
		if r.subs != nil {
			delete(r.subs, s)
		}
		r.smu.Unlock()
		s.end()
	}
}

func (r *Registry) emit(e Event) {
	e.Time = r.clock.Now()
	r.mu.Lock()
	if en := (*r.entries.Load())[e.Name]; en != nil {
		if len(en.history) == historyLen {
			en.history = append(en.history[:0], en.history[1:]...)
		}
		en.history = append(en.history, e)
	}
	r.mu.Unlock()
	r.smu.Lock()
	for s := range r.subs {
		s.push(e)
	}
	r.smu.Unlock()
}

func (r *Registry) closeSubscribers() {
	r.smu.Lock()
	subs := r.subs
	r.subs = nil
	r.smu.Unlock()
	for s := range subs {
		s.end()
	}
}

type subscriber struct {
	mu    sync.Mutex
	queue []Event
	wake  chan struct{}
	out   chan Event
	done  chan struct{}
	once  sync.Once
}

func (s *subscriber) push(e Event) {
	s.mu.Lock()
	s.queue = append(s.queue, e)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *subscriber) end() { s.once.Do(func() { close(s.done) }) }

func (s *subscriber) pump() {
	defer close(s.out)
	for {
		s.mu.Lock()
		q := s.queue
		s.queue = nil
		s.mu.Unlock()
		for _, e := range q {
			select {
			case s.out <- e:
			case <-s.done:
				return
			}
		}
		select {
		case <-s.wake:
		case <-s.done:
			return
		}
	}
}
