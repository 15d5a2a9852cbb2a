package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"switchyard/e2e/testenv"
)

// A combo passes a target over before calling it when its breaker is open, its provider cools
// down or its model is locked out on every connection: the target's upstream gets no call, the
// next target answers, and the route says which target was skipped, why, by what and until when.
// In each case the first target fails one plain request (which puts it out) and would answer
// the next call: only the skip keeps the combo off it.
func TestComboSkipsATargetBeforeDispatch(t *testing.T) {
	serverError := testenv.Status(500, nil, `{"error":{"message":"internal failure","type":"server_error"}}`)
	missingModel := testenv.Status(404, nil, `{"error":{"message":"The model m does not exist","type":"invalid_request_error","code":"model_not_found"}}`)
	cases := []struct {
		name     string
		settings map[string]any
		fail     http.HandlerFunc
		reason   string
		source   string
		// out is how long the exclusion lasts at least, once the connection's own short
		// cooldown has passed.
		out time.Duration
	}{
		{name: "open breaker", fail: serverError, reason: "circuit_open", source: "provider pa", out: 20 * time.Second,
			settings: map[string]any{"circuit_breaker": map[string]any{"failure_threshold": 1}}},
		{name: "provider cooling", fail: serverError, reason: "provider_cooldown", source: "provider pa", out: 5 * time.Minute,
			settings: map[string]any{"circuit_breaker": map[string]any{"enabled": false},
				"provider_cooldown": map[string]any{"enabled": true, "api_key": map[string]any{"failure_threshold": 1}}}},
		{name: "model locked out", fail: missingModel, reason: "model_lockout", source: "connection main", out: time.Minute,
			settings: map[string]any{"model_lockout": map[string]any{"enabled": true}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, upA, upB, key := twoProviders(t, flaky(1, tc.fail, testenv.JSONAnswer(answerFrom("a"))), testenv.JSONAnswer(answerFrom("b")))
			e.MustAPI("PATCH", "/api/settings/resilience", tc.settings, 200)
			addCombo(t, e, map[string]any{"name": "c", "targets": []any{target("pa", "m"), target("pb", "m")}})
			if st, _, body := chatCall(t, e, key, `{"model":"pa/m","messages":[{"role":"user","content":"hi"}]}`, nil); st < 400 {
				t.Fatalf("the plain request to pa: %d %s", st, body)
			}
			e.Clock.Advance(5 * time.Second) // past the connection's own cooldown (3 s)

			st, h, body := chatCall(t, e, key, comboBody("c"), nil)
			if st != 200 || !strings.Contains(body, "from b") {
				t.Fatalf("%d %s", st, body)
			}
			if n := len(upA.ChatRequests()); n != 1 {
				t.Fatalf("the skipped target's upstream was called %d times after the plain request", n-1)
			}
			if n := len(upB.ChatRequests()); n != 1 {
				t.Fatalf("the next target was called %d times", n)
			}
			if got := h.Get("X-Switchyard-Route"); got != "combo=c; target=pb/m; attempts=1" {
				t.Fatalf("route header %q", got)
			}
			d := lastLogged(t, e)
			if got := routeOf(d); len(got) != 2 || got[0] != "pa/m skipped "+tc.reason || got[1] != "pb/m answered" {
				t.Fatalf("route %v", got)
			}
			skip := d["route"].([]any)[0].(map[string]any)
			until, err := time.Parse(time.RFC3339Nano, skip["until"].(string))
			if err != nil || skip["source"] != tc.source || until.Sub(e.Clock.Now()) < tc.out {
				t.Fatalf("skip %v: want source %q and until at least %v away", skip, tc.source, tc.out)
			}
			if d["attempt_count"].(float64) != 1 || gjson.Get(body, "choices.0.message.content").String() != "from b" {
				t.Fatalf("logged %v attempts", d["attempt_count"])
			}
		})
	}
}
