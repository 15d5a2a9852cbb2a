package ops

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"switchyard/e2e/testenv"
)

// Without trusted proxies, forwarding headers are the client's own words: a guesser who sends a
// new X-Forwarded-For or X-Real-IP with every attempt is throttled on its real address all the
// same, and naming the admin's address locks out only the guesser.
func TestLoginThrottleIgnoresForwardingHeadersFromUntrustedPeers(t *testing.T) {
	e := testenv.New(t)
	attacker, admin := testenv.ClientFrom(t, "127.0.0.2"), testenv.ClientFrom(t, "127.0.0.1")
	throttled := 0
	for i := range 30 {
		h := map[string]string{"X-Forwarded-For": fmt.Sprintf("203.0.113.%d", i+1), "X-Real-IP": fmt.Sprintf("198.51.100.%d", i+1)}
		if i%2 == 1 {
			h = map[string]string{"X-Forwarded-For": "127.0.0.1", "X-Real-IP": "127.0.0.1"} // the admin's own address
		}
		switch st := testenv.Login(t, attacker, e.Base, "guess", h); st {
		case http.StatusTooManyRequests:
			throttled++
		case http.StatusUnauthorized:
		default:
			t.Fatalf("attempt %d: status %d", i, st)
		}
	}
	if throttled != 25 {
		t.Fatalf("%d of 30 spoofed attempts throttled, want 25 (5 allowed, then every one)", throttled)
	}
	if st := testenv.Login(t, admin, e.Base, testenv.Password, nil); st != http.StatusSeeOther {
		t.Fatalf("the admin, from another address, was refused: %d", st)
	}
}

// Behind a trusted proxy, the client is the nearest address in X-Forwarded-For that is not the
// proxy: a guesser cannot choose it by sending its own header through the proxy, and the real
// admin behind the same proxy stays able to log in. A peer that is not a trusted proxy is keyed
// on its own address whatever it sends.
func TestLoginThrottleKeysOnTheClientBehindATrustedProxy(t *testing.T) {
	e := testenv.New(t, "--trusted-proxies", "127.0.0.1/32")
	proxy, direct := testenv.ClientFrom(t, "127.0.0.1"), testenv.ClientFrom(t, "127.0.0.2")
	const adminIP, guesserIP = "198.51.100.7", "203.0.113.66"
	count := func(c *http.Client, header func(i int) map[string]string) (throttled int) {
		for i := range 12 {
			switch st := testenv.Login(t, c, e.Base, "guess", header(i)); st {
			case http.StatusTooManyRequests:
				throttled++
			case http.StatusUnauthorized:
			default:
				t.Fatalf("attempt %d: status %d", i, st)
			}
		}
		return throttled
	}
	// The guesser writes the admin's address first; the proxy appends the address it saw.
	if n := count(proxy, func(int) map[string]string {
		return map[string]string{"X-Forwarded-For": adminIP + ", " + guesserIP}
	}); n != 7 {
		t.Fatalf("guesser behind the proxy: %d of 12 throttled, want 7", n)
	}
	// A peer that is not the proxy is keyed on its own address, whatever it claims.
	if n := count(direct, func(i int) map[string]string {
		return map[string]string{"X-Forwarded-For": fmt.Sprintf("192.0.2.%d", i+1), "X-Real-IP": adminIP}
	}); n != 7 {
		t.Fatalf("untrusted peer: %d of 12 throttled, want 7", n)
	}
	if st := testenv.Login(t, proxy, e.Base, testenv.Password, map[string]string{"X-Forwarded-For": adminIP}); st != http.StatusSeeOther {
		t.Fatalf("the admin behind the proxy was refused: %d", st)
	}
	// X-Real-IP from the trusted proxy names the client too.
	if st := testenv.Login(t, proxy, e.Base, testenv.Password, map[string]string{"X-Real-IP": "192.0.2.200"}); st != http.StatusSeeOther {
		t.Fatalf("a client named by X-Real-IP was refused: %d", st)
	}
}

// Failed client-key checks are throttled per client address like the password login: five at
// once, then one every 12 s. Past the budget the address gets 429 in its surface's format with
// Retry-After, and its keys are not checked at all; another address is unaffected, and
// successful checks spend nothing.
func TestFailedClientKeyChecksAreThrottledPerAddress(t *testing.T) {
	e, _, key := testenv.SetupOne(t, testenv.JSONAnswer(testenv.CompletionJSON))
	chat := func(c *http.Client, k string) (int, http.Header, string) {
		return testenv.Call(t, c, "POST", e.Base+"/v1/chat/completions", testenv.ChatBody,
			map[string]string{"Authorization": "Bearer " + k, "Content-Type": "application/json"})
	}

	// Successes spend nothing: twenty good calls, then the full budget of five failures.
	busy := testenv.ClientFrom(t, "127.0.7.3")
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

	guesser := testenv.ClientFrom(t, "127.0.7.1")
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
	st, h, body = testenv.Call(t, guesser, "POST", e.Base+"/v1/messages", `{"model":"up/gpt-test","max_tokens":5,"messages":[]}`,
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
	if st, _, body := chat(testenv.ClientFrom(t, "127.0.7.2"), key); st != 200 {
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
	guesser := testenv.ClientFrom(t, "127.0.7.10")
	wrong := map[string]string{"Authorization": "Bearer wrong-admin-token-000000"}
	for i := range 3 {
		if st, _, _ := testenv.Call(t, guesser, "GET", e.Base+"/api/providers", "", wrong); st != 401 {
			t.Fatalf("guess %d: %d", i, st)
		}
	}
	for i := range 2 {
		if st, _, _ := testenv.Call(t, guesser, "GET", e.Base+"/metrics", "", wrong); st != 401 {
			t.Fatalf("metrics guess %d: %d", i, st)
		}
	}
	st, h, body := testenv.Call(t, guesser, "GET", e.Base+"/api/providers", "", wrong)
	if st != 429 || h.Get("Retry-After") != "12" || h.Get("Content-Type") != "application/json" ||
		!strings.Contains(body, `"code":"too_many_auth_failures"`) {
		t.Fatalf("sixth guess: %d Retry-After %q %s", st, h.Get("Retry-After"), body)
	}
	if st, _, _ := testenv.Call(t, guesser, "GET", e.Base+"/metrics", "", wrong); st != 429 {
		t.Fatalf("metrics past the budget: %d", st)
	}
	right := map[string]string{"Authorization": "Bearer " + testenv.AdminToken}
	if st, _, _ := testenv.Call(t, guesser, "GET", e.Base+"/api/providers", "", right); st != 429 {
		t.Fatalf("the right token from the throttled address: %d, want 429", st)
	}
	if st, _, _ := testenv.Call(t, testenv.ClientFrom(t, "127.0.7.11"), "GET", e.Base+"/api/providers", "", right); st != 200 {
		t.Fatalf("the right token from another address: %d", st)
	}
	// The password login has a budget of its own, and a session needs no token.
	jar, _ := cookiejar.New(nil)
	guesser.Jar = jar
	if st := testenv.Login(t, guesser, e.Base, testenv.Password, nil); st != http.StatusSeeOther {
		t.Fatalf("login from the throttled address: %d", st)
	}
	if st, _, body := testenv.Call(t, guesser, "GET", e.Base+"/api/providers", "", wrong); st != 200 {
		t.Fatalf("session with a wrong token from the throttled address: %d %s", st, body)
	}
}
