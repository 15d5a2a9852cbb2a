package e2e

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"switchyard/e2e/testenv"
)

// liveOf cuts one target's live state out of the Combos page (by its row's label).
func liveOf(t *testing.T, page, combo, label string) string {
	t.Helper()
	card := cardOf(page, combo)
	_, row, ok := strings.Cut(card, `data-target="`+label+`"`)
	if !ok {
		t.Fatalf("no target %s in combo %s", label, combo)
	}
	row, _, _ = strings.Cut(row, "</tr>")
	return row
}

var countdownMS = regexp.MustCompile(`data-countdown-ms="([0-9]+)"`)

// TestComboTargetLiveState: the Combos page says of each provider target why it cannot take a
// request now and when it can again: a model lockout (the connection it is on, with its own
// countdown and a link to the lockout), an open breaker (until its probe, even when the connection
// is usable sooner), and nothing usable at all (a disabled connection: only the operator helps).
func TestComboTargetLiveState(t *testing.T) {
	lk := testenv.NewFakeUpstream(t, testenv.PerModel(map[string]http.HandlerFunc{
		"gpt-a": testenv.Status(404, nil, `{"error":{"message":"The model gpt-a does not exist","code":"model_not_found"}}`),
		"gpt-b": testenv.JSONAnswer(testenv.CompletionJSON),
	}), "gpt-a", "gpt-b")
	br := testenv.NewFakeUpstream(t, testenv.Status(500, nil, `{"error":{"message":"internal failure","type":"server_error"}}`))
	e := testenv.New(t)
	e.AddProvider("lk", lk.URL+"/v1")
	lkMain := e.AddConnection("lk", "main", "sk-lk", 0)
	e.AddProvider("br", br.URL+"/v1")
	e.AddConnection("br", "main", "sk-br", 0)
	e.AddProvider("off", br.URL+"/v1")
	offConn := e.AddConnection("off", "only", "sk-off", 0)
	e.MustAPI("PATCH", "/api/connections/"+itoa(offConn), map[string]any{"enabled": false}, 200)
	key := e.NewKey()
	e.WaitModels(key, "lk/gpt-a")
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0},
		"model_lockout": map[string]any{"enabled": true}, "circuit_breaker": map[string]any{"failure_threshold": 1}}, 200)
	for _, body := range []string{`{"model":"lk/gpt-a","messages":[]}`, `{"model":"br/gpt-test","messages":[]}`} {
		testenv.ReadAll(t, e.Chat(context.Background(), key, body))
	}
	e.MustAPI("POST", "/api/combos", map[string]any{"name": "watch", "targets": []any{
		map[string]any{"provider": "lk", "model": "gpt-a"}, map[string]any{"provider": "lk", "model": "gpt-b"},
		map[string]any{"provider": "br", "model": "gpt-test"}, map[string]any{"provider": "off", "model": "m"}}}, 201)

	c := e.Login()
	_, page := testenv.Fetch(t, c, http.MethodGet, e.Base+"/combos", nil, nil)

	locked := liveOf(t, page, "watch", "lk/gpt-a")
	if !strings.Contains(locked, `data-status="waiting"`) || !strings.Contains(locked, "Model locked on") ||
		!strings.Contains(locked, `href="/model-cooldowns#lockout-lk-`+itoa(lkMain)+`-gpt-a"`) {
		t.Fatalf("locked model: %s", locked)
	}
	// Usable again when the lockout ends (120 s, the default base).
	if m := countdownMS.FindStringSubmatch(locked); m == nil || m[1] != "120000" {
		t.Fatalf("locked model's countdown %v", m)
	}
	if other := liveOf(t, page, "watch", "lk/gpt-b"); !strings.Contains(other, `data-status="ready"`) {
		t.Fatalf("another model of the same connection: %s", other)
	}
	open := liveOf(t, page, "watch", "br/gpt-test")
	if !strings.Contains(open, `data-status="waiting"`) || !strings.Contains(open, "chip-open") {
		t.Fatalf("open breaker: %s", open)
	}
	// The connection's own cooldown (3 s) ends before the breaker lets a probe through (30 s).
	for _, m := range countdownMS.FindAllStringSubmatch(open, -1) {
		if m[1] != "30000" {
			t.Fatalf("open breaker's countdowns %v, want 30 s (the probe)", m)
		}
	}
	if out := liveOf(t, page, "watch", "off/m"); !strings.Contains(out, `data-status="out"`) || strings.Contains(out, "data-countdown-ms") {
		t.Fatalf("only a disabled connection: %s", out)
	}

	// When the times pass, the targets are ready again (the breaker lets its probe through).
	e.Clock.Advance(2 * time.Minute)
	_, page = testenv.Fetch(t, c, http.MethodGet, e.Base+"/combos", nil, nil)
	for _, label := range []string{"lk/gpt-a", "br/gpt-test"} {
		if s := liveOf(t, page, "watch", label); !strings.Contains(s, `data-status="ready"`) {
			t.Fatalf("%s after the times passed: %s", label, s)
		}
	}
}
