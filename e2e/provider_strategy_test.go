package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"switchyard/e2e/testenv"
)

// A provider's own strategy orders its connections: priority by default (the lower first), or
// any combo strategy by name (round-robin here rotates whatever the priorities).
func TestProviderConnectionStrategy(t *testing.T) {
	var byKey [2]atomic.Int64
	up := testenv.NewFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Authorization"), "sk-second") {
			byKey[1].Add(1)
		} else {
			byKey[0].Add(1)
		}
		testenv.JSONAnswer(testenv.CompletionJSON)(w, r)
	}, "m")
	e := testenv.New(t)
	id := e.AddProvider("p", up.URL+"/v1")
	e.AddConnection("p", "first", "sk-first-0001", 0)
	e.AddConnection("p", "second", "sk-second-0001", 1)
	key := e.NewKey()
	for range 4 {
		chatCall(t, e, key, `{"model":"p/m","messages":[]}`, nil)
	}
	if byKey[0].Load() != 4 || byKey[1].Load() != 0 {
		t.Fatalf("priority: %d / %d", byKey[0].Load(), byKey[1].Load())
	}
	if out := e.MustAPI("PATCH", fmt.Sprintf("/api/providers/%d", id), map[string]any{"strategy": "round-robin"}, 200); out["strategy"] != "round-robin" {
		t.Fatalf("provider %v", out)
	}
	for range 4 {
		chatCall(t, e, key, `{"model":"p/m","messages":[]}`, nil)
	}
	if byKey[0].Load() != 6 || byKey[1].Load() != 2 {
		t.Fatalf("round-robin: %d / %d", byKey[0].Load(), byKey[1].Load())
	}
	if out := e.MustAPI("PATCH", fmt.Sprintf("/api/providers/%d", id), map[string]any{"strategy": "fastest"}, 422); !strings.Contains(fmt.Sprint(out), "strategy") {
		t.Fatalf("unknown strategy: %v", out)
	}
	// The edit page offers it.
	st, page := testenv.Fetch(t, e.Login(), "GET", e.Base+fmt.Sprintf("/providers/%d/edit", id), nil, nil)
	if st != 200 || !strings.Contains(page, `id="provider-strategy"`) || !strings.Contains(page, `value="round-robin" selected`) {
		t.Fatalf("edit page %d", st)
	}
}
