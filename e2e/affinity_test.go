package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/e2e/testenv"
)

// affinitySetup is a provider "p" with the connections a (key-a) and b (key-b) at the given
// priorities, on an upstream that answers 429 from a connection while its flag in fails is set,
// and session affinity on with a 10 minute TTL.
func affinitySetup(t *testing.T, prioA, prioB int) (e *testenv.Env, up *testenv.FakeUpstream, key string, a, b int64, fails map[string]*atomic.Bool) {
	t.Helper()
	fails = map[string]*atomic.Bool{"key-a": {}, "key-b": {}}
	answer := func(k string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if fails[k].Load() {
				testenv.Status(429, nil, `{"error":{"message":"slow down","type":"rate_limit_error"}}`)(w, r)
				return
			}
			testenv.JSONAnswer(testenv.CompletionJSON)(w, r)
		}
	}
	up = testenv.NewFakeUpstream(t, testenv.ByKey(map[string]http.HandlerFunc{"key-a": answer("key-a"), "key-b": answer("key-b")}))
	e = testenv.New(t)
	e.AddProvider("p", up.URL+"/v1")
	a = e.AddConnection("p", "a", "key-a", prioA)
	b = e.AddConnection("p", "b", "key-b", prioB)
	key = e.NewKey()
	e.WaitModels(key, "p/gpt-test")
	setAffinity(e, 600_000)
	return e, up, key, a, b, fails
}

func setAffinity(e *testenv.Env, ttlMS int64) {
	e.T.Helper()
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"session_affinity_ttl_ms": ttlMS}, 200)
}

// chatAs sends one chat request with the session headers given and returns the key of the
// connection that answered (the last upstream call's credential).
func chatAs(e *testenv.Env, up *testenv.FakeUpstream, key string, header map[string]string) string {
	e.T.Helper()
	resp := e.Post(context.Background(), "/v1/chat/completions", key, `{"model":"p/gpt-test","messages":[{"role":"user","content":"hi"}]}`, header)
	if body := testenv.ReadAll(e.T, resp); resp.StatusCode != 200 {
		e.T.Fatalf("%d %s", resp.StatusCode, body)
	}
	reqs := up.ChatRequests()
	return strings.TrimPrefix(reqs[len(reqs)-1].Header.Get("Authorization"), "Bearer ")
}

func pinsOn(e *testenv.Env, id int64) int {
	e.T.Helper()
	return int(connState(e, id)["pins"].(float64))
}

// Two equal connections share the traffic round robin; a session keeps hitting the connection
// that first served it, whatever the rotation, and the session headers never reach the upstream.
// The providers page shows the pins on the connection rows.
func TestSessionAffinityKeepsASessionOnItsConnection(t *testing.T) {
	e, up, key, a, b, _ := affinitySetup(t, 0, 0)
	sessionA := map[string]string{"X-Switchyard-Session": "session-a"}
	sessionB := map[string]string{"X-Session-Id": "session-b"}
	firstA := chatAs(e, up, key, sessionA)
	firstB := chatAs(e, up, key, sessionB)
	spread := map[string]int{}
	for i := range 10 {
		if got := chatAs(e, up, key, sessionA); got != firstA {
			t.Fatalf("request %d of session A went to %s, pinned to %s", i+1, got, firstA)
		}
		if got := chatAs(e, up, key, sessionB); got != firstB {
			t.Fatalf("request %d of session B went to %s, pinned to %s", i+1, got, firstB)
		}
		spread[chatAs(e, up, key, nil)]++
	}
	if spread["key-a"] == 0 || spread["key-b"] == 0 {
		t.Fatalf("requests without a session did not spread: %v", spread)
	}
	for _, r := range up.ChatRequests() {
		for _, h := range []string{"X-Switchyard-Session", "X-Session-Id"} {
			if v := r.Header.Get(h); v != "" {
				t.Fatalf("%s reached the upstream: %q", h, v)
			}
		}
	}
	if n := pinsOn(e, a) + pinsOn(e, b); n != 2 {
		t.Fatalf("%d pins, want 2", n)
	}
	// Each connection row shows how many sessions it holds (nothing when none).
	status, page := testenv.Fetch(t, e.Login(), "GET", e.Base+"/providers", nil, nil)
	if status != 200 {
		t.Fatalf("providers page: %d", status)
	}
	for k, id := range map[string]int64{"key-a": a, "key-b": b} {
		n := 0
		for _, first := range []string{firstA, firstB} {
			if first == k {
				n++
			}
		}
		cell := testenv.Between(page, `id="cqueue-`+itoa(id)+`"`, `class="q-sub"`)
		if shown := strings.Contains(cell, `class="q-pinned">`+itoa(int64(n))+`<`); shown != (n > 0) || n == 0 && strings.Contains(cell, "q-pinned") {
			t.Fatalf("row of %s (%d pinned): %s", k, n, cell)
		}
	}
	// The gateway's log names the session only by a short hash.
	if strings.Contains(e.Logs.String(), "session-a") {
		t.Fatal("the session key is in the log")
	}
}

// A failover evicts the pin and pins the connection that then serves; the pin holds while its
// connection can serve, across a restart: the session stays on the connection it moved to even
// when the preferred one is back; it lapses after the TTL without use; and with the setting at 0
// there is no pinning at all.
func TestSessionAffinityFailoverRestartExpiryAndOff(t *testing.T) {
	e, up, key, a, b, fails := affinitySetup(t, 0, 1) // a is preferred
	aFails := fails["key-a"]
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)
	session := map[string]string{"X-Switchyard-Session": "long-chat"}
	if got := chatAs(e, up, key, session); got != "key-a" {
		t.Fatalf("first request on %s", got)
	}
	if pinsOn(e, a) != 1 {
		t.Fatal("the session is not pinned to a")
	}

	// Both fail: the failover away from a evicted the pin, and nothing served to be pinned.
	aFails.Store(true)
	fails["key-b"].Store(true)
	resp := e.Post(context.Background(), "/v1/chat/completions", key, `{"model":"p/gpt-test","messages":[{"role":"user","content":"hi"}]}`, session)
	if body := testenv.ReadAll(t, resp); resp.StatusCode != 429 {
		t.Fatalf("both failing: %d %s", resp.StatusCode, body)
	}
	if pinsOn(e, a)+pinsOn(e, b) != 0 {
		t.Fatalf("pins after a failover that nothing served: a %d, b %d", pinsOn(e, a), pinsOn(e, b))
	}
	aFails.Store(false)
	fails["key-b"].Store(false)
	e.Clock.Advance(time.Minute)
	if got := chatAs(e, up, key, session); got != "key-a" || pinsOn(e, a) != 1 {
		t.Fatalf("pinned anew on %s", got)
	}

	// a fails (and cools): the request fails over to b, and the pin moves with it.
	aFails.Store(true)
	if got := chatAs(e, up, key, session); got != "key-b" {
		t.Fatalf("failover went to %s", got)
	}
	if pinsOn(e, a) != 0 || pinsOn(e, b) != 1 {
		t.Fatalf("pins after the failover: a %d, b %d", pinsOn(e, a), pinsOn(e, b))
	}
	// a is back: requests without a session go there, the session stays on b.
	aFails.Store(false)
	e.Clock.Advance(time.Minute)
	if got := chatAs(e, up, key, nil); got != "key-a" {
		t.Fatalf("a request without a session went to %s", got)
	}
	if got := chatAs(e, up, key, session); got != "key-b" {
		t.Fatalf("the pinned session went to %s", got)
	}

	// The pin survives a restart.
	e.Restart()
	if got := chatAs(e, up, key, session); got != "key-b" {
		t.Fatalf("after the restart the session went to %s", got)
	}
	if got := chatAs(e, up, key, nil); got != "key-a" {
		t.Fatalf("after the restart a request without a session went to %s", got)
	}

	// Ten minutes without a request: the pin is gone, and the session starts over on a.
	e.Clock.Advance(10 * time.Minute)
	if pinsOn(e, b) != 0 {
		t.Fatal("an expired pin is still counted")
	}
	if got := chatAs(e, up, key, session); got != "key-a" {
		t.Fatalf("after the TTL the session went to %s", got)
	}

	// Pinned to b again by a failover; then affinity is switched off: priority decides again.
	aFails.Store(true)
	chatAs(e, up, key, session)
	aFails.Store(false)
	e.Clock.Advance(time.Minute)
	if got := chatAs(e, up, key, session); got != "key-b" {
		t.Fatalf("the session is not pinned to b: %s", got)
	}
	setAffinity(e, 0)
	if got := chatAs(e, up, key, session); got != "key-a" {
		t.Fatalf("with affinity off the session went to %s", got)
	}
	if pinsOn(e, a)+pinsOn(e, b) != 0 {
		t.Fatal("pins are shown while affinity is off")
	}
	// Off means off after a restart too: nothing comes back.
	e.Restart()
	setAffinity(e, 600_000)
	if got := chatAs(e, up, key, session); got != "key-a" || pinsOn(e, b) != 0 {
		t.Fatalf("a pin came back after affinity was off: %s", got)
	}
}

// Three failures in a row on the pinned connection clear the pin; a failure that is the
// request's own (a plain 400) does not count.
func TestSessionAffinityThreeFailuresClearThePin(t *testing.T) {
	var mode atomic.Value
	mode.Store("ok")
	up := testenv.NewFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load() {
		case "overloaded": // model_capacity: fails over, cools nothing (model lockout is off)
			testenv.Status(529, nil, `{"error":{"message":"overloaded","type":"overloaded_error"}}`)(w, r)
		case "bad":
			testenv.Status(400, nil, `{"error":{"message":"messages must not be empty","type":"invalid_request_error"}}`)(w, r)
		default:
			testenv.JSONAnswer(testenv.CompletionJSON)(w, r)
		}
	})
	e := testenv.New(t)
	e.AddProvider("p", up.URL+"/v1")
	a := e.AddConnection("p", "a", "key-a", 0)
	key := e.NewKey()
	e.WaitModels(key, "p/gpt-test")
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"session_affinity_ttl_ms": 600_000,
		"retry": map[string]any{"max_retries": 0}}, 200)
	send := func(want int) {
		t.Helper()
		resp := e.Post(context.Background(), "/v1/chat/completions", key, `{"model":"p/gpt-test","messages":[]}`,
			map[string]string{"X-Session-Id": "s"})
		if body := testenv.ReadAll(t, resp); resp.StatusCode != want {
			t.Fatalf("%d %s, want %d", resp.StatusCode, body, want)
		}
	}
	send(200)
	mode.Store("bad")
	for range 3 {
		send(400)
	}
	if pinsOn(e, a) != 1 {
		t.Fatal("the request's own failures cleared the pin")
	}
	mode.Store("overloaded")
	send(529)
	send(529)
	if pinsOn(e, a) != 1 {
		t.Fatal("two failures cleared the pin")
	}
	send(529)
	if pinsOn(e, a) != 0 {
		t.Fatal("three failures in a row did not clear the pin")
	}
	mode.Store("ok")
	send(200)
	if pinsOn(e, a) != 1 {
		t.Fatal("the next success did not pin the session again")
	}
}

// Claude Code's own session id pins its session to one Claude account (the accounts otherwise
// take turns); its header still reaches the account, while the gateway's session headers do not.
func TestSessionAffinityForClaudeCode(t *testing.T) {
	e, f, key := claudeSetup(t, testenv.MessagesAnswer())
	e.AddClaudeAccount(f, "ada@example.com")
	e.AddClaudeAccount(f, "bob@example.com")
	e.WaitModels(key, "anthropic/claude-test")
	setAffinity(e, 600_000)
	const s1 = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
	body := `{"model":"claude-test","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
	whose := func() (string, http.Header) {
		reqs := f.MessageRequests()
		last := reqs[len(reqs)-1]
		return f.AccountOf(&http.Request{Header: last.Header}), last.Header
	}
	claudeCode(e, key, body, map[string]string{"X-Claude-Code-Session-Id": s1})
	first, _ := whose()
	for i := range 5 {
		claudeCode(e, key, body, map[string]string{"X-Claude-Code-Session-Id": s1})
		if got, h := whose(); got != first || h.Get("X-Claude-Code-Session-Id") != s1 {
			t.Fatalf("request %d went to %s (%q), pinned to %s", i+2, got, h.Get("X-Claude-Code-Session-Id"), first)
		}
	}
	// Without a session the accounts take turns.
	seen := map[string]bool{}
	for range 4 {
		claudeCode(e, key, body, nil)
		who, _ := whose()
		seen[who] = true
	}
	if len(seen) != 2 {
		t.Fatalf("requests without a session all went to %v", seen)
	}
	claudeCode(e, key, body, map[string]string{"X-Claude-Code-Session-Id": s1, "X-Switchyard-Session": "sy", "X-Session-Id": "sid"})
	if _, h := whose(); h.Get("X-Switchyard-Session") != "" || h.Get("X-Session-Id") != "" || h.Get("X-Claude-Code-Session-Id") == "" {
		t.Fatalf("passthrough headers: %v", h)
	}
}

// A Claude Code session's binding to its account survives a restart: the account that served it
// first keeps the original ids, and another account serving it after the restart sees ids of
// its own, as before the restart.
func TestClaudeCodeSessionBindingsSurviveARestart(t *testing.T) {
	const s = "0f8fad5b-d9cb-469f-a165-70867728950e"
	var adaFails atomic.Bool
	var f *testenv.FakeClaude
	e, f, key := claudeSetup(t, func(w http.ResponseWriter, r *http.Request) {
		if adaFails.Load() && f.AccountOf(r) == "ada@example.com" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(500)
			io.WriteString(w, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`)
			return
		}
		testenv.MessagesAnswer()(w, r)
	})
	e.AddClaudeAccount(f, "ada@example.com")
	bob := e.AddClaudeAccount(f, "bob@example.com")
	e.MustAPI("PATCH", "/api/connections/"+itoa(bob), map[string]any{"priority": 1}, 200) // ada first
	e.WaitModels(key, "anthropic/claude-test")
	body := `{"model":"claude-test","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
	last := func() testenv.Recorded { reqs := f.MessageRequests(); return reqs[len(reqs)-1] }
	whose := func(r testenv.Recorded) string { return f.AccountOf(&http.Request{Header: r.Header}) }

	// ada fails once and cools: the session's first request goes to bob, who sees it as it came.
	adaFails.Store(true)
	claudeCode(e, key, body, map[string]string{"X-Claude-Code-Session-Id": "another-session"})
	adaFails.Store(false)
	claudeCode(e, key, body, map[string]string{"X-Claude-Code-Session-Id": s})
	if r := last(); whose(r) != "bob@example.com" || r.Header.Get("X-Claude-Code-Session-Id") != s {
		t.Fatalf("first request: %s %q", whose(r), r.Header.Get("X-Claude-Code-Session-Id"))
	}

	e.Restart()
	e.WaitModels(key, "anthropic/claude-test")
	e.Clock.Advance(time.Minute) // ada's cooldown is over
	claudeCode(e, key, body, map[string]string{"X-Claude-Code-Session-Id": s})
	r := last()
	if whose(r) != "ada@example.com" {
		t.Fatalf("after the restart served by %s", whose(r))
	}
	if id := r.Header.Get("X-Claude-Code-Session-Id"); id == s || !uuidShaped(id) {
		t.Fatalf("ada sees %q of a session bound to bob", id)
	}
}

func uuidShaped(s string) bool {
	return len(s) == 36 && s[8] == '-' && s[13] == '-' && s[14] == '4' && s[18] == '-' && s[23] == '-'
}

// A pinned connection that only has no free slot is still eligible: the session's request goes
// ahead on a sibling with a free slot (as any request does), but the pin stays, and the next
// request goes back to the pinned connection.
func TestSessionAffinityBusyPinStays(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	entered := make(chan struct{}, 1)
	up := testenv.NewFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if b, _ := io.ReadAll(r.Body); strings.Contains(string(b), "hold") {
			entered <- struct{}{}
			<-release
		}
		testenv.JSONAnswer(testenv.CompletionJSON)(w, r)
	})
	e := testenv.New(t)
	t.Cleanup(free) // runs before the gateway and the upstream stop, also when the test fails
	e.AddProvider("p", up.URL+"/v1")
	a := e.AddConnection("p", "a", "key-a", 0)
	b := e.AddConnection("p", "b", "key-b", 1)
	e.MustAPI("PATCH", "/api/connections/"+itoa(a), map[string]any{"max_concurrent": 1}, 200)
	key := e.NewKey()
	e.WaitModels(key, "p/gpt-test")
	setAffinity(e, 600_000)
	session := map[string]string{"X-Session-Id": "s"}
	if got := chatAs(e, up, key, session); got != "key-a" {
		t.Fatalf("first request on %s", got)
	}
	// A request without a session takes a's only slot and holds it.
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp := e.Post(context.Background(), "/v1/chat/completions", key, `{"model":"p/gpt-test","messages":[{"role":"user","content":"hold"}]}`, nil)
		testenv.ReadAll(t, resp)
	}()
	<-entered
	if got := chatAs(e, up, key, session); got != "key-b" {
		t.Fatalf("with a full the session's request went to %s", got)
	}
	if pinsOn(e, a) != 1 || pinsOn(e, b) != 0 {
		t.Fatalf("the pin moved off a busy connection: a %d, b %d", pinsOn(e, a), pinsOn(e, b))
	}
	free()
	<-done
	if got := chatAs(e, up, key, session); got != "key-a" {
		t.Fatalf("after a's slot was free the session went to %s", got)
	}
}
