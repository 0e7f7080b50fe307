package main

import (
	"sync"

	"github.com/allocd/allocd/registry"
)

// moduleServer serves the registry's modules on /v1/plugins/{name}/module; serve's event loop
// calls changed on every change of a version in force, which wakes the long-polls.
type moduleServer struct {
	r  *registry.Registry
	mu sync.Mutex
	ch chan struct{}
}

func newModuleServer(r *registry.Registry) *moduleServer {
	return &moduleServer{r: r, ch: make(chan struct{})}
}

func (m *moduleServer) Module(name string) ([]byte, string, bool) {
	wasm, hash, err := m.r.Module(name)
	return wasm, hash, err == nil
}

func (m *moduleServer) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ch
}

func (m *moduleServer) changed() {
	m.mu.Lock()
	close(m.ch)
	m.ch = make(chan struct{})
	m.mu.Unlock()
}
