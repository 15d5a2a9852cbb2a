package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"switchyard/e2e/testenv"
)

// Failed client-key checks are throttled per client address like the password login: five at
// once, then one every 12 s. Past the budget the address gets 429 in its surface's format with
// Retry-After, and its keys are not checked at all; another address is unaffected, and
// successful checks spend nothing.
func TestFailedClientKeyChecksAreThrottledPerAddress(t *testing.T) {
	e, _, key := setupOne(t, testenv.JSONAnswer(testenv.CompletionJSON))
	chat := func(c *http.Client, k string) (int, http.Header, string) {
		return call(t, c, "POST", e.Base+"/v1/chat/completions", testenv.ChatBody,
			map[string]string{"Authorization": "Bearer " + k, "Content-Type": "application/json"})
	}

	// Successes spend nothing: twenty good calls, then the full budget of five failures.
	busy := clientFrom(t, "127.0.7.3")
	for i := range 20 {
		if st, _, body := chat(busy, key); st != 200 {
			t.Fatalf("good call %d: %d %s", i, st, body)
		}
	}
	for i := range 5 {
		if st, _, _ := chat(busy, "sk-sy-wrong"); st != 401 {
			t.Fatalf("wrong key %d after good calls: %d, want 401", i, st)
		}
	}

	guesser := clientFrom(t, "127.0.7.1")
	for i := range 5 {
		st, _, body := chat(guesser, "sk-sy-guess")
		if st != 401 || !strings.Contains(body, `"code":"invalid_api_key"`) {
			t.Fatalf("guess %d: %d %s", i, st, body)
		}
	}
	st, h, body := chat(guesser, "sk-sy-guess")
	var oa struct{ Error struct{ Type, Code string } }
	if json.Unmarshal([]byte(body), &oa) != nil || st != 429 || oa.Error.Type != "rate_limit_error" ||
		oa.Error.Code != "too_many_auth_failures" || h.Get("Retry-After") != "12" {
		t.Fatalf("sixth guess: %d Retry-After %q %s", st, h.Get("Retry-After"), body)
	}
	// The Anthropic surface answers in its own format; x-api-key counts like a bearer key.
	st, h, body = call(t, guesser, "POST", e.Base+"/v1/messages", `{"model":"up/gpt-test","max_tokens":5,"messages":[]}`,
		map[string]string{"x-api-key": "sk-sy-guess", "anthropic-version": "2023-06-01"})
	var an struct {
		Type  string
		Error struct{ Type string }
	}
	if json.Unmarshal([]byte(body), &an) != nil || st != 429 || an.Type != "error" || an.Error.Type != "rate_limit_error" ||
		h.Get("Retry-After") == "" {
		t.Fatalf("Anthropic surface: %d %s", st, body)
	}
	// Even the right key is not checked from that address while its budget is spent.
	if st, _, _ := chat(guesser, key); st != 429 {
		t.Fatalf("the right key from the throttled address: %d, want 429", st)
	}
	// Another address with a valid key is not affected.
	if st, _, body := chat(clientFrom(t, "127.0.7.2"), key); st != 200 {
		t.Fatalf("valid key from another address: %d %s", st, body)
	}
	// One attempt comes back every 12 s.
	e.Clock.Advance(12 * time.Second)
	if st, _, body := chat(guesser, key); st != 200 {
		t.Fatalf("12 s later, the right key: %d %s", st, body)
	}
}

// Failed admin-token checks share that budget per address: on the admin API and /metrics. A
// logged-in session still passes while the token budget is spent.
func TestFailedAdminTokenChecksAreThrottledPerAddress(t *testing.T) {
	e := testenv.New(t)
	guesser := clientFrom(t, "127.0.7.10")
	wrong := map[string]string{"Authorization": "Bearer wrong-admin-token-000000"}
	for i := range 3 {
		if st, _, _ := call(t, guesser, "GET", e.Base+"/api/providers", "", wrong); st != 401 {
			t.Fatalf("guess %d: %d", i, st)
		}
	}
	for i := range 2 {
		if st, _, _ := call(t, guesser, "GET", e.Base+"/metrics", "", wrong); st != 401 {
			t.Fatalf("metrics guess %d: %d", i, st)
		}
	}
	st, h, body := call(t, guesser, "GET", e.Base+"/api/providers", "", wrong)
	if st != 429 || h.Get("Retry-After") != "12" || h.Get("Content-Type") != "application/json" ||
		!strings.Contains(body, `"code":"too_many_auth_failures"`) {
		t.Fatalf("sixth guess: %d Retry-After %q %s", st, h.Get("Retry-After"), body)
	}
	if st, _, _ := call(t, guesser, "GET", e.Base+"/metrics", "", wrong); st != 429 {
		t.Fatalf("metrics past the budget: %d", st)
	}
	right := map[string]string{"Authorization": "Bearer " + testenv.AdminToken}
	if st, _, _ := call(t, guesser, "GET", e.Base+"/api/providers", "", right); st != 429 {
		t.Fatalf("the right token from the throttled address: %d, want 429", st)
	}
	if st, _, _ := call(t, clientFrom(t, "127.0.7.11"), "GET", e.Base+"/api/providers", "", right); st != 200 {
		t.Fatalf("the right token from another address: %d", st)
	}
	// The password login has a budget of its own, and a session needs no token.
	jar, _ := cookiejar.New(nil)
	guesser.Jar = jar
	if st := login(t, guesser, e.Base, testenv.Password, nil); st != http.StatusSeeOther {
		t.Fatalf("login from the throttled address: %d", st)
	}
	if st, _, body := call(t, guesser, "GET", e.Base+"/api/providers", "", wrong); st != 200 {
		t.Fatalf("session with a wrong token from the throttled address: %d %s", st, body)
	}
}
