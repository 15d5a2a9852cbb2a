package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"switchyard/e2e/testenv"
)

// wantBreaker checks provider up's status and breaker in the state API and the breaker gauge's
// value in the metrics.
func wantBreaker(t *testing.T, e *testenv.Env, when, status, breaker string, gauge int) {
	t.Helper()
	if s := e.ProviderStatus("up"); s["status"] != status || s["breaker"] != breaker {
		t.Fatalf("%s: %v", when, s)
	}
	if m := e.Metrics(); !strings.Contains(m, fmt.Sprintf(`switchyard_circuit_breaker_state{model="",provider="up"} %d`, gauge)) {
		t.Fatalf("breaker gauge does not show %s", breaker)
	}
}

func TestBreakerOpensRecoversAndSurvivesRestart(t *testing.T) {
	failing, handler := testenv.FailingUntilFixed()
	e, up, key := testenv.SetupOne(t, handler)
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)
	if s := e.ProviderStatus("up"); s["status"] != "healthy" {
		t.Fatalf("start: %v", s)
	}
	// Five failed requests (the connection's cooldown is waited out in between) open the breaker.
	for i := 0; i < 5; i++ {
		r := e.Chat(context.Background(), key, testenv.ChatBody)
		testenv.ReadAll(t, r)
		if r.StatusCode != 500 {
			t.Fatalf("request %d: %d", i, r.StatusCode)
		}
		if i == 2 { // the only connection cools down: nothing can take a request now
			if s := e.ProviderStatus("up"); s["status"] != "unavailable" || s["connections"].(map[string]any)["cooling"] != 1.0 {
				t.Fatalf("after 3 failures: %v", s)
			}
		}
		if i < 4 {
			e.Clock.Advance(10 * time.Minute / 9) // past any connection cooldown, inside the window
		}
		if i == 2 { // usable again, but the model fails more often than not
			if s := e.ProviderStatus("up"); s["status"] != "degraded" {
				t.Fatalf("after 3 failures and the cooldown: %v", s["status"])
			}
		}
	}
	wantBreaker(t, e, "after 5 failures", "circuit_open", "open", 2)
	// While open, requests fail at once without reaching the upstream.
	calls := len(up.ChatRequests())
	r := e.Chat(context.Background(), key, testenv.ChatBody)
	body := testenv.ReadAll(t, r)
	if r.StatusCode != 503 || !strings.Contains(body, "circuit breaker is open - provider up temporarily unavailable") ||
		r.Header.Get("Retry-After") == "" || len(up.ChatRequests()) != calls {
		t.Fatalf("open breaker: %d %s", r.StatusCode, body)
	}
	// A restart keeps it open.
	e.Restart()
	r = e.Chat(context.Background(), key, testenv.ChatBody)
	testenv.ReadAll(t, r)
	if r.StatusCode != 503 || len(up.ChatRequests()) != calls {
		t.Fatalf("after restart the breaker must still be open: %d", r.StatusCode)
	}
	// After the timeout one probe goes through; two successful probes close it.
	failing.Store(false)
	e.Clock.Advance(time.Minute) // past the breaker timeout and the connection's last cooldown (48 s)
	for i := 0; i < 2; i++ {
		r = e.Chat(context.Background(), key, testenv.ChatBody)
		testenv.ReadAll(t, r)
		if r.StatusCode != 200 {
			t.Fatalf("probe %d: %d", i, r.StatusCode)
		}
		if i == 0 {
			if s := e.ProviderStatus("up"); s["status"] != "recovering" {
				t.Fatalf("after one probe: %v", s["status"])
			}
		}
	}
	wantBreaker(t, e, "after recovery", "healthy", "closed", 0)
}

func TestBreakerResetByOperator(t *testing.T) {
	e, _, key := testenv.SetupOne(t, testenv.Status(502, nil, `bad gateway`))
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0},
		"circuit_breaker": map[string]any{"failure_threshold": 1}}, 200)
	testenv.ReadAll(t, e.Chat(context.Background(), key, testenv.ChatBody))
	if s := e.ProviderStatus("up"); s["breaker"] != "open" {
		t.Fatalf("threshold 1: %v", s["breaker"])
	}
	e.API("POST", "/api/resilience/breakers/reset", map[string]any{"provider": "up"}, nil)
	if s := e.ProviderStatus("up"); s["breaker"] != "closed" {
		t.Fatalf("after reset: %v", s["breaker"])
	}
}

// TestSuccessfulProbesMakeTheProviderHealthyAgain: when half-open probes close the breaker, every
// subscriber of the transition hears it: the provider's outcome window starts afresh (healthy,
// not degraded by the failures that opened the breaker), the transition is logged and the gauge
// shows closed. No restart in between, which would clear the window by itself.
func TestSuccessfulProbesMakeTheProviderHealthyAgain(t *testing.T) {
	failing, handler := testenv.FailingUntilFixed()
	e, _, key := testenv.SetupOne(t, handler)
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0},
		"circuit_breaker": map[string]any{"failure_threshold": 3}}, 200)
	for i := 0; i < 3; i++ {
		testenv.ReadAll(t, e.Chat(context.Background(), key, testenv.ChatBody))
		e.Clock.Advance(20 * time.Second) // past the connection's cooldown
	}
	if s := e.ProviderStatus("up"); s["breaker"] != "open" {
		t.Fatalf("three failures: %v", s)
	}
	failing.Store(false)
	e.Clock.Advance(time.Minute)
	for i := 0; i < 2; i++ {
		if r := e.Chat(context.Background(), key, testenv.ChatBody); r.StatusCode != 200 {
			t.Fatalf("probe %d: %d %s", i, r.StatusCode, testenv.ReadAll(t, r))
		} else {
			testenv.ReadAll(t, r)
		}
	}
	s := e.ProviderStatus("up")
	if s["status"] != "healthy" || s["breaker"] != "closed" || s["degraded_models"] != nil {
		t.Fatalf("after the probes closed the breaker: %v", s)
	}
	if !strings.Contains(e.Logs.String(), `msg="circuit breaker" provider=up model="" from=half_open to=closed`) {
		t.Fatal("the closing transition was not logged")
	}
	if m := e.Metrics(); !strings.Contains(m, `switchyard_circuit_breaker_state{model="",provider="up"} 0`) {
		t.Fatal("breaker gauge does not show closed")
	}
}
