package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/e2e/testenv"
)

// errCode is the code of an OpenAI-shaped error answer.
func errCode(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

// An exclusive session lease, end to end: a key with the scope acquires one of its connections
// (swl_ token, generation 1); its requests with the lease headers are served by that connection
// alone and the headers never reach the upstream; everybody else's requests skip it (reason
// lease in the request log); stale generations, missing headers and other providers are refused
// before dispatch; renew extends, expiry frees, re-acquire bumps the generation, release frees at
// once; keys without the scope are refused.
func TestSessionLeaseLifecycle(t *testing.T) {
	up := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON), "gpt-test")
	other := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON), "gpt-other")
	e := testenv.New(t)
	e.AddProvider("up", up.URL+"/v1")
	e.AddProvider("other", other.URL+"/v1")
	c1 := e.AddConnection("up", "c1", "sk-c1", 0)
	e.AddConnection("up", "c2", "sk-c2", 1)
	e.AddConnection("other", "o1", "sk-o1", 0)
	plain := e.NewKey()
	e.WaitModels(plain, "up/gpt-test")
	e.WaitModels(plain, "other/gpt-other")
	key, keyID := testenv.LeaseKey(e, "agent", c1)

	if st, out, _ := testenv.LeaseCall(t, e, "/v1/session-leases", plain, map[string]any{"action": "acquire"}); st != 403 || errCode(out) != "lease_not_allowed" {
		t.Fatalf("a key without the scope: %d %v", st, out)
	}
	st, got, _ := testenv.LeaseCall(t, e, "/v1/session-leases", key, map[string]any{"action": "acquire"})
	owner, _ := got["owner"].(string)
	conn, _ := got["connection"].(map[string]any)
	if st != 200 || !strings.HasPrefix(owner, "swl_") || len(owner) != 47 || got["generation"] != float64(1) ||
		conn["id"] != float64(c1) || conn["name"] != "c1" || conn["provider"] != "up" || got["expires_at"] == nil {
		t.Fatalf("acquire: %d %v", st, got)
	}
	lease := func(gen int) map[string]string {
		return map[string]string{"X-Switchyard-Lease-Owner": owner, "X-Switchyard-Lease-Generation": strconv.Itoa(gen)}
	}
	chat := func(k string, h map[string]string) (int, string) {
		r := e.Post(context.Background(), "/v1/chat/completions", k, testenv.ChatBody, h)
		return r.StatusCode, testenv.ReadAll(t, r)
	}

	// The holder's requests go to its connection, without the lease headers.
	from := len(up.ChatRequests())
	for range 3 {
		if st, body := chat(key, lease(1)); st != 200 {
			t.Fatalf("holder: %d %s", st, body)
		}
	}
	if got := testenv.UsedKeys(up, from); strings.Join(got, ",") != "sk-c1,sk-c1,sk-c1" {
		t.Fatalf("the holder was served by %v", got)
	}
	for _, r := range up.Requests() {
		for k := range r.Header {
			if strings.HasPrefix(strings.ToLower(k), "x-switchyard") {
				t.Fatalf("the upstream got %s", k)
			}
		}
		if strings.Contains(r.Body, owner) {
			t.Fatal("the upstream got the owner token")
		}
	}

	// Everybody else keeps off the leased connection, although it comes first by priority.
	from = len(up.ChatRequests())
	for range 2 {
		if st, body := chat(plain, nil); st != 200 {
			t.Fatalf("plain: %d %s", st, body)
		}
	}
	if got := testenv.UsedKeys(up, from); strings.Join(got, ",") != "sk-c2,sk-c2" {
		t.Fatalf("plain requests were served by %v", got)
	}
	e.Eventually("the skip is logged", func() bool {
		for _, r := range requestLog(t, e, "?surface=/v1/chat/completions&limit=2") {
			var detail loggedRequest
			e.API("GET", fmt.Sprintf("/api/requests/%d", r.ID), nil, &detail)
			for _, s := range detail.Skipped {
				if s.Connection == "c1" && s.Reason == "lease" {
					return true
				}
			}
		}
		return false
	})

	// Refused before dispatch.
	from = len(up.ChatRequests())
	for _, c := range []struct {
		name   string
		header map[string]string
		body   string
		status int
		code   string
	}{
		{"a stale generation", lease(2), testenv.ChatBody, 409, "lease_generation_stale"},
		{"a generation that is no number", map[string]string{"X-Switchyard-Lease-Owner": owner, "X-Switchyard-Lease-Generation": "one"}, testenv.ChatBody, 400, "invalid_request"},
		{"the owner alone", map[string]string{"X-Switchyard-Lease-Owner": owner}, testenv.ChatBody, 400, "lease_headers_incomplete"},
		{"the generation alone", map[string]string{"X-Switchyard-Lease-Generation": "1"}, testenv.ChatBody, 400, "lease_headers_incomplete"},
		{"an unknown owner", map[string]string{"X-Switchyard-Lease-Owner": "swl_" + strings.Repeat("A", 43), "X-Switchyard-Lease-Generation": "1"}, testenv.ChatBody, 409, "lease_not_found"},
		{"another provider", lease(1), `{"model":"other/gpt-other","messages":[{"role":"user","content":"hi"}]}`, 409, "lease_provider_mismatch"},
	} {
		r := e.Post(context.Background(), "/v1/chat/completions", key, c.body, c.header)
		body := testenv.ReadAll(t, r)
		var out map[string]any
		json.Unmarshal([]byte(body), &out)
		if r.StatusCode != c.status || errCode(out) != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, r.StatusCode, body, c.status, c.code)
		}
	}
	// Another key presenting the token holds nothing.
	if st, body := chat(plain, lease(1)); st != 409 || !strings.Contains(body, "lease_not_found") {
		t.Errorf("another key with the token: %d %s", st, body)
	}
	if n := len(up.ChatRequests()) - from; n != 0 {
		t.Fatalf("refused lease requests made %d upstream calls", n)
	}
	if n := len(other.ChatRequests()); n != 0 {
		t.Fatalf("the other provider was called %d times", n)
	}

	// Renew (also without /v1) extends the lease and keeps the generation.
	e.Clock.Advance(8 * time.Minute)
	st, got, _ = testenv.LeaseCall(t, e, "/session-leases", key, map[string]any{"action": "renew", "owner": owner, "ttl_ms": 300000})
	if st != 200 || got["generation"] != float64(1) || got["ttl_ms"] != float64(300000) || got["owner"] != nil {
		t.Fatalf("renew: %d %v", st, got)
	}
	e.Clock.Advance(4 * time.Minute) // past the first ten minutes, within the renewed five
	if st, body := chat(key, lease(1)); st != 200 {
		t.Fatalf("after the renewal: %d %s", st, body)
	}

	// Expired: the holder is refused, renew says so, the connection is free for everybody.
	e.Clock.Advance(2 * time.Minute)
	if st, body := chat(key, lease(1)); st != 409 || !strings.Contains(body, "lease_expired") {
		t.Fatalf("expired: %d %s", st, body)
	}
	if st, out, _ := testenv.LeaseCall(t, e, "/v1/session-leases", key, map[string]any{"action": "renew", "owner": owner}); st != 409 || errCode(out) != "lease_expired" {
		t.Fatalf("renewing an expired lease: %d %v", st, out)
	}
	from = len(up.ChatRequests())
	if st, _ := chat(plain, nil); st != 200 || strings.Join(testenv.UsedKeys(up, from), ",") != "sk-c1" {
		t.Fatalf("the expired lease still keeps others off c1: %v", testenv.UsedKeys(up, from))
	}

	// Re-acquiring with the token gives the next generation; the old one is stale.
	st, got, _ = testenv.LeaseCall(t, e, "/v1/session-leases", key, map[string]any{"action": "acquire", "owner": owner})
	if st != 200 || got["generation"] != float64(2) || got["owner"] != owner {
		t.Fatalf("re-acquire: %d %v", st, got)
	}
	if st, body := chat(key, lease(1)); st != 409 || !strings.Contains(body, "lease_generation_stale") {
		t.Fatalf("the old generation: %d %s", st, body)
	}
	if st, body := chat(key, lease(2)); st != 200 {
		t.Fatalf("the new generation: %d %s", st, body)
	}

	// Release frees at once; the token is then unknown.
	if st, out, _ := testenv.LeaseCall(t, e, "/v1/session-leases", key, map[string]any{"action": "release", "owner": owner}); st != 200 || out["released"] != true {
		t.Fatalf("release: %d %v", st, out)
	}
	if st, body := chat(key, lease(2)); st != 409 || !strings.Contains(body, "lease_not_found") {
		t.Fatalf("after release: %d %s", st, body)
	}
	if st, out, _ := testenv.LeaseCall(t, e, "/v1/session-leases", key, map[string]any{"action": "release", "owner": owner}); st != 404 || errCode(out) != "lease_not_found" {
		t.Fatalf("releasing twice: %d %v", st, out)
	}

	// Malformed lease requests.
	for _, c := range []struct {
		body any
		code string
	}{
		{map[string]any{"action": "borrow"}, "invalid_request"},
		{map[string]any{"action": "renew"}, "invalid_request"},
		{map[string]any{"action": "renew", "owner": "swl_short"}, "invalid_request"},
		{map[string]any{"action": "release", "owner": owner, "connection": c1}, "invalid_request"},
		{map[string]any{"action": "acquire", "ttl_ms": -1}, "invalid_request"},
		{map[string]any{"action": "acquire", "lease": true}, "invalid"},
	} {
		if st, out, _ := testenv.LeaseCall(t, e, "/v1/session-leases", key, c.body); st != 400 || errCode(out) != c.code {
			t.Errorf("%v: %d %v", c.body, st, out)
		}
	}

	// A key that loses the scope loses its leases.
	st, got, _ = testenv.LeaseCall(t, e, "/v1/session-leases", key, map[string]any{"action": "acquire", "connection": c1})
	if st != 200 {
		t.Fatalf("acquire again: %d %v", st, got)
	}
	e.MustAPI("PATCH", "/api/keys/"+keyID, map[string]any{"scopes": []string{}}, 200)
	owner = got["owner"].(string)
	if st, body := chat(key, lease(1)); st != 409 || !strings.Contains(body, "lease_not_found") {
		t.Fatalf("after the scope went: %d %s", st, body)
	}
	if st, out, _ := testenv.LeaseCall(t, e, "/v1/session-leases", key, map[string]any{"action": "acquire"}); st != 403 || errCode(out) != "lease_not_allowed" {
		t.Fatalf("acquire without the scope: %d %v", st, out)
	}
}

// When every connection that could serve a request is leased by other owners, the request is
// refused at once with 429 lease_capacity, a bounded Retry-After and each connection in
// diagnostics.excluded with reason lease and the seconds until its lease ends; an acquire that
// finds every allowed connection leased gets the same code.
func TestLeaseCapacity(t *testing.T) {
	e, up, plain, ids := testenv.SetupConns(t, testenv.JSONAnswer(testenv.CompletionJSON), testenv.UpConn{Name: "c1", Key: "sk-c1", Priority: 0}, testenv.UpConn{Name: "c2", Key: "sk-c2", Priority: 0})
	c1, c2 := ids[0], ids[1]
	key, _ := testenv.LeaseKey(e, "agents", c1, c2)

	if st, out, _ := testenv.LeaseCall(t, e, "/v1/session-leases", key, map[string]any{"action": "acquire", "ttl_ms": 120000}); st != 200 {
		t.Fatalf("first: %d %v", st, out)
	}
	if st, out, _ := testenv.LeaseCall(t, e, "/v1/session-leases", key, map[string]any{"action": "acquire", "ttl_ms": 3600000}); st != 200 {
		t.Fatalf("second: %d %v", st, out)
	}
	st, out, h := testenv.LeaseCall(t, e, "/v1/session-leases", key, map[string]any{"action": "acquire"})
	if st != 429 || errCode(out) != "lease_capacity" || h.Get("Retry-After") != "120" {
		t.Fatalf("a third acquire: %d %v Retry-After %q", st, out, h.Get("Retry-After"))
	}

	before := len(up.ChatRequests())
	r := e.Chat(context.Background(), plain, testenv.ChatBody)
	body := testenv.ReadAll(t, r)
	var doc map[string]any
	json.Unmarshal([]byte(body), &doc)
	if r.StatusCode != 429 || errCode(doc) != "lease_capacity" || r.Header.Get("Retry-After") != "120" {
		t.Fatalf("a request with every connection leased: %d %s Retry-After %q", r.StatusCode, body, r.Header.Get("Retry-After"))
	}
	ex := excludedOf(t, body)
	left := map[string]float64{}
	for _, x := range ex {
		if x["reason"] != "lease" {
			t.Fatalf("excluded %v", ex)
		}
		left[x["connection"].(string)] = x["seconds_left"].(float64)
	}
	if len(left) != 2 || left["c1"]+left["c2"] != 120+3600 {
		t.Fatalf("seconds left %v", left)
	}
	if len(up.ChatRequests()) != before {
		t.Fatal("the refused request reached the upstream")
	}

	// Retry-After is bounded: with both leases far out, five minutes at most.
	e.Clock.Advance(121 * time.Second)
	if st, out, _ := testenv.LeaseCall(t, e, "/v1/session-leases", key, map[string]any{"action": "acquire", "ttl_ms": 86400000}); st != 200 {
		t.Fatalf("taking the expired one: %d %v", st, out)
	}
	r = e.Chat(context.Background(), plain, testenv.ChatBody)
	testenv.ReadAll(t, r)
	if r.StatusCode != 429 || r.Header.Get("Retry-After") != "300" {
		t.Fatalf("bounded Retry-After: %d %q", r.StatusCode, r.Header.Get("Retry-After"))
	}
	_, _, h = testenv.LeaseCall(t, e, "/v1/session-leases", key, map[string]any{"action": "acquire"})
	if h.Get("Retry-After") != "300" {
		t.Fatalf("acquire's bounded Retry-After: %q", h.Get("Retry-After"))
	}
	// Anthropic's shape on its surface.
	r = e.PostAnthropic("/v1/messages", plain, `{"model":"up/gpt-test","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, nil)
	body = testenv.ReadAll(t, r)
	if r.StatusCode != 429 || !strings.Contains(body, `"type":"rate_limit_error"`) {
		t.Fatalf("messages: %d %s", r.StatusCode, body)
	}
}

// Fifty acquires at once for three connections: exactly three succeed, each on its own
// connection, the others get lease_capacity; the database and the engine agree.
func TestConcurrentLeaseAcquiresOverHTTP(t *testing.T) {
	up := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON), "gpt-test")
	e := testenv.New(t)
	e.AddProvider("up", up.URL+"/v1")
	var conns []int64
	for i := range 3 {
		conns = append(conns, e.AddConnection("up", fmt.Sprintf("c%d", i), fmt.Sprintf("sk-c%d", i), 0))
	}
	key, _ := testenv.LeaseKey(e, "swarm", conns...)
	type result struct {
		status int
		conn   float64
		owner  string
		gen    float64
	}
	results := make([]result, 50)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req, _ := http.NewRequest("POST", e.Base+"/v1/session-leases", strings.NewReader(`{"action":"acquire"}`))
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := testenv.ChatClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var out map[string]any
			json.NewDecoder(resp.Body).Decode(&out)
			res := result{status: resp.StatusCode}
			if c, ok := out["connection"].(map[string]any); ok {
				res.conn, res.owner, res.gen = c["id"].(float64), out["owner"].(string), out["generation"].(float64)
			}
			results[i] = res
		}()
	}
	close(start)
	wg.Wait()
	byConn := map[float64]int{}
	refused := 0
	for _, r := range results {
		switch r.status {
		case 200:
			byConn[r.conn]++
		case 429:
			refused++
		default:
			t.Fatalf("status %d", r.status)
		}
	}
	if len(byConn) != 3 || refused != 47 {
		t.Fatalf("leases by connection %v, %d refused", byConn, refused)
	}
	for c, n := range byConn {
		if n != 1 {
			t.Fatalf("connection %v went to %d owners", c, n)
		}
	}
	var rows int
	if err := e.App.DB.R.Get(&rows, `SELECT COUNT(*) FROM session_leases WHERE expires_at > ?`, e.Clock.Now().UnixMilli()); err != nil || rows != 3 {
		t.Fatalf("%d active rows, %v", rows, err)
	}
	// Each winner is served by its own connection.
	for _, r := range results {
		if r.status != 200 {
			continue
		}
		from := len(up.ChatRequests())
		resp := e.Post(context.Background(), "/v1/chat/completions", key, testenv.ChatBody, map[string]string{
			"X-Switchyard-Lease-Owner": r.owner, "X-Switchyard-Lease-Generation": strconv.Itoa(int(r.gen))})
		testenv.ReadAll(t, resp)
		if want := fmt.Sprintf("sk-c%d", int(r.conn)-int(conns[0])); resp.StatusCode != 200 || strings.Join(testenv.UsedKeys(up, from), ",") != want {
			t.Fatalf("holder of %v: %d, served by %v", r.conn, resp.StatusCode, testenv.UsedKeys(up, from))
		}
	}
}

// Lease tokens stay out of the logs: the gateway's log lines and the request log (bodies kept,
// redacted) never hold the owner token; leases survive a restart.
func TestLeaseTokensStayOutOfTheLogs(t *testing.T) {
	up := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON), "gpt-test")
	e := testenv.New(t, "--request-log-body-kib", "16")
	e.AddProvider("up", up.URL+"/v1")
	c1 := e.AddConnection("up", "c1", "sk-c1", 0)
	plain := e.NewKey()
	e.WaitModels(plain, "up/gpt-test")
	key, _ := testenv.LeaseKey(e, "agent", c1)
	_, got, _ := testenv.LeaseCall(t, e, "/v1/session-leases", key, map[string]any{"action": "acquire"})
	owner := got["owner"].(string)
	h := map[string]string{"X-Switchyard-Lease-Owner": owner, "X-Switchyard-Lease-Generation": "1"}
	r := e.Post(context.Background(), "/v1/chat/completions", key, testenv.ChatBody, h)
	testenv.ReadAll(t, r)
	if r.StatusCode != 200 {
		t.Fatalf("holder: %d", r.StatusCode)
	}
	testenv.LeaseCall(t, e, "/v1/session-leases", key, map[string]any{"action": "renew", "owner": owner})
	e.Eventually("the lease calls are logged", func() bool { return len(requestLog(t, e, "?surface=/v1/session-leases")) == 2 })
	for _, it := range requestLog(t, e, "?surface=/v1/session-leases") {
		var detail map[string]any
		e.API("GET", fmt.Sprintf("/api/requests/%d", it.ID), nil, &detail)
		raw, _ := json.Marshal(detail)
		if strings.Contains(string(raw), owner) || !strings.Contains(string(raw), "[redacted]") {
			t.Fatalf("request log entry %s", raw)
		}
	}
	if strings.Contains(e.Logs.String(), owner) || strings.Contains(e.Logs.String(), owner[4:]) {
		t.Fatal("the gateway's log holds the owner token")
	}

	e.Restart()
	r = e.Post(context.Background(), "/v1/chat/completions", plain, testenv.ChatBody, nil)
	body := testenv.ReadAll(t, r)
	if r.StatusCode != 429 || !strings.Contains(body, "lease_capacity") {
		t.Fatalf("after a restart the lease still holds c1: %d %s", r.StatusCode, body)
	}
	r = e.Post(context.Background(), "/v1/chat/completions", key, testenv.ChatBody, h)
	if testenv.ReadAll(t, r); r.StatusCode != 200 {
		t.Fatalf("the holder after a restart: %d", r.StatusCode)
	}
}
