package ui_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/allocd/allocd/coordinator"
	"github.com/allocd/allocd/ui"
)

// BenchmarkPage renders the groups page and a group's page with 50 groups, in process (the
// server's share of a page load; the browser test measures the whole load in Chromium).
func BenchmarkPage(b *testing.B) {
	e := newEnv(b, ui.Read)
	for i := range 48 {
		name := fmt.Sprintf("bulk-%02d", i)
		if _, _, err := e.c.PutGroup(name, coordinator.Binding{Strategy: "averagely"}); err != nil {
			b.Fatal(err)
		}
		e.join(name, "m1", nil)
	}
	e.tick()
	h := e.ts.Config.Handler
	for _, path := range []string{"/ui/groups", "/ui/groups/g"} {
		b.Run(path, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("%s: %d", path, rec.Code)
				}
			}
		})
	}
}
