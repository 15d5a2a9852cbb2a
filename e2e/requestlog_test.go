package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/e2e/testenv"
	"switchyard/i18n"
	"switchyard/services/traffic"
)

type loggedRequest struct {
	ID           int64  `json:"id"`
	RequestID    string `json:"request_id"`
	Time         string `json:"time"`
	ClientKeyID  int64  `json:"client_key_id"`
	ClientKey    string `json:"client_key"`
	Surface      string `json:"surface"`
	Model        string `json:"model"`
	Provider     string `json:"provider"`
	Connection   string `json:"connection"`
	Status       int    `json:"status"`
	ErrorCode    string `json:"error_code"`
	Error        string `json:"error"`
	AttemptCount int    `json:"attempt_count"`
	Retries      int    `json:"retries"`
	Failovers    int    `json:"failovers"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	Attempts     []struct {
		Connection string `json:"connection"`
		Kind       string `json:"kind"`
		Status     int    `json:"status"`
		Reason     string `json:"reason"`
		Detail     string `json:"detail"`
		DurationMS *int64 `json:"duration_ms"`
	} `json:"attempts"`
	Skipped []struct {
		Connection string `json:"connection"`
		Reason     string `json:"reason"`
		Detail     string `json:"detail"`
	} `json:"skipped"`
}

func requestLog(t *testing.T, e *testenv.Env, query string) []loggedRequest {
	t.Helper()
	var out struct{ Items []loggedRequest }
	if code := e.API("GET", "/api/requests"+query, nil, &out); code != 200 {
		t.Fatalf("GET /api/requests%s: %d", query, code)
	}
	return out.Items
}

// TestRequestLogAPI: every authenticated client request is logged off the request path with who
// asked, what the engine did and how it ended (one refused for its key is not); a failed-over request shows its attempt chain, a later one
// the connection it skipped; filters select, newest first; no secret appears.
func TestRequestLogAPI(t *testing.T) {
	e, _, key, _ := testenv.SetupConns(t, testenv.ByKey(map[string]http.HandlerFunc{
		"sk-first-SECRET": testenv.Status(429, map[string]string{"Retry-After": "60"},
			`{"error":{"message":"Rate limit reached for sk-first-SECRET","type":"requests"}}`),
		"sk-second-SECRET": testenv.JSONAnswer(testenv.CompletionJSON),
	}), testenv.UpConn{Name: "first", Key: "sk-first-SECRET", Priority: 0}, testenv.UpConn{Name: "second", Key: "sk-second-SECRET", Priority: 1})
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)

	if r := e.Chat(context.Background(), key, testenv.ChatBody); r.StatusCode != 200 {
		t.Fatalf("failover request: %d %s", r.StatusCode, testenv.ReadAll(t, r))
	} else {
		testenv.ReadAll(t, r)
	}
	if r := e.Chat(context.Background(), key, testenv.ChatBody); r.StatusCode != 200 {
		t.Fatalf("second request: %d", r.StatusCode)
	} else {
		testenv.ReadAll(t, r)
	}
	if r := e.Chat(context.Background(), "sk-sy-not-a-key", testenv.ChatBody); r.StatusCode != 401 {
		t.Fatalf("bad key: %d", r.StatusCode)
	} else {
		testenv.ReadAll(t, r)
	}
	if r := e.Chat(context.Background(), key, `{"model":"nobody/nope","messages":[]}`); r.StatusCode != 404 {
		t.Fatalf("unknown model: %d", r.StatusCode)
	} else {
		testenv.ReadAll(t, r)
	}

	// Each request is handed to the log just after its answer went out.
	e.Eventually("the chat requests are logged", func() bool { return len(requestLog(t, e, "?surface=/v1/chat/completions")) == 3 })
	all := requestLog(t, e, "")
	if len(all) < 4 { // the three authenticated requests above and WaitModels' model lists
		t.Fatalf("%d logged requests, want at least 4: %+v", len(all), all)
	}
	for i := 1; i < len(all); i++ {
		if all[i].ID >= all[i-1].ID {
			t.Fatalf("not newest first: %d after %d", all[i].ID, all[i-1].ID)
		}
	}
	chats := requestLog(t, e, "?surface=/v1/chat/completions")
	if len(chats) != 3 { // the request refused for its key is counted, not logged
		t.Fatalf("%d chat requests logged, want 3", len(chats))
	}
	notFound, second, failover := chats[0], chats[1], chats[2]
	if failover.Status != 200 || failover.Provider != "up" || failover.Model != "gpt-test" || failover.Connection != "second" ||
		failover.AttemptCount != 2 || failover.Failovers != 1 || failover.ClientKey != "test" || failover.ClientKeyID == 0 ||
		failover.InputTokens != 3 || failover.OutputTokens != 2 || failover.RequestID == "" {
		t.Fatalf("failed-over request: %+v", failover)
	}
	if _, err := time.Parse(time.RFC3339, failover.Time); err != nil {
		t.Fatalf("time %q: %v", failover.Time, err)
	}
	if second.Connection != "second" || second.AttemptCount != 1 {
		t.Fatalf("second request: %+v", second)
	}
	if notFound.Status != 404 || notFound.ErrorCode != "model_not_found" || !strings.Contains(notFound.Error, "nobody/nope") {
		t.Fatalf("unknown model: %+v", notFound)
	}

	var detail loggedRequest
	if code := e.API("GET", fmt.Sprintf("/api/requests/%d", failover.ID), nil, &detail); code != 200 {
		t.Fatalf("detail: %d", code)
	}
	if len(detail.Attempts) != 2 {
		t.Fatalf("attempts %+v, want two", detail.Attempts)
	}
	a0, a1 := detail.Attempts[0], detail.Attempts[1]
	if a0.Connection != "first" || a0.Kind != "first" || a0.Status != 429 || a0.Reason != "rate_limit" || a0.DurationMS == nil ||
		a1.Connection != "second" || a1.Kind != "failover" || a1.Status != 200 || a1.Reason != "" {
		t.Fatalf("attempt chain %+v", detail.Attempts)
	}
	if code := e.API("GET", fmt.Sprintf("/api/requests/%d", second.ID), nil, &detail); code != 200 ||
		len(detail.Skipped) != 1 || detail.Skipped[0].Connection != "first" || detail.Skipped[0].Reason != "connection_cooldown" ||
		detail.Skipped[0].Detail != "rate_limit" {
		t.Fatalf("skipped connections of the second request: %d %+v", code, detail.Skipped)
	}

	for _, c := range []struct {
		query string
		want  int
	}{
		{"?status=error&surface=/v1/chat/completions", 1},
		{"?status=4xx&surface=/v1/chat/completions", 1},
		{"?status=401", 0},
		{"?status=404", 1},
		{"?status=2xx&provider=up&model=gpt-test", 2},
		{fmt.Sprintf("?key=%d&surface=/v1/chat/completions", failover.ClientKeyID), 3},
		{"?provider=nobody", 0},
		{"?surface=/v1/chat/completions&limit=1", 1},
		{fmt.Sprintf("?surface=/v1/chat/completions&before=%d", second.ID), 1},
		{"?until=" + time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), 0},
	} {
		if got := requestLog(t, e, c.query); len(got) != c.want {
			t.Errorf("%s: %d requests, want %d", c.query, len(got), c.want)
		}
	}
	for _, q := range []string{"?status=abc", "?since=yesterday", "?limit=0", "?key=x"} {
		var out map[string]any
		if code := e.API("GET", "/api/requests"+q, nil, &out); code != 422 {
			t.Errorf("%s: %d, want 422", q, code)
		}
	}
	if code := e.API("GET", "/api/requests/999999", nil, nil); code != 404 {
		t.Errorf("unknown id: %d", code)
	}
	// An upstream that echoes the credential in its error: the log keeps the message, redacted.
	echo := testenv.NewFakeUpstream(t, testenv.Status(500, nil, `{"error":{"message":"bad key sk-echo-SECRET"}}`))
	e.AddProvider("echo", echo.URL+"/v1")
	e.AddConnection("echo", "main", "sk-echo-SECRET", 0)
	e.WaitModels(key, "echo/gpt-test")
	if r := e.Chat(context.Background(), key, `{"model":"echo/gpt-test","messages":[]}`); r.StatusCode != 500 {
		t.Fatalf("echo: %d", r.StatusCode)
	} else {
		testenv.ReadAll(t, r)
	}
	failed := requestLog(t, e, "?provider=echo&status=5xx")
	if len(failed) != 1 || !strings.Contains(failed[0].Error, "bad key [redacted]") {
		t.Fatalf("the failed request's message: %+v", failed)
	}
	raw := e.MustAPI("GET", "/api/requests", nil, 200)
	failedDetail := e.MustAPI("GET", fmt.Sprintf("/api/requests/%d", failed[0].ID), nil, 200)
	if s := fmt.Sprint(raw, failedDetail); strings.Contains(s, "SECRET") || strings.Contains(s, key) {
		t.Fatal("a credential appears in the request log")
	}

	// The log survives a restart.
	e.Restart()
	if got := requestLog(t, e, "?surface=/v1/chat/completions&provider=up"); len(got) != 2 || got[1].ID != failover.ID {
		t.Fatalf("after a restart: %d requests", len(got))
	}
}

// TestRequestLogRetention: rows older than the retention are pruned; with a retention of 0 days
// nothing is kept while the charts still count.
func TestRequestLogRetention(t *testing.T) {
	e, _, key := testenv.SetupOne(t, testenv.JSONAnswer(testenv.CompletionJSON))
	testenv.ReadAll(t, e.Chat(context.Background(), key, testenv.ChatBody))
	if n := len(requestLog(t, e, "?surface=/v1/chat/completions")); n != 1 {
		t.Fatalf("%d rows", n)
	}
	e.Clock.Advance(8 * 24 * time.Hour) // past the default 7 days
	testenv.ReadAll(t, e.Chat(context.Background(), key, testenv.ChatBody))
	got := requestLog(t, e, "?surface=/v1/chat/completions")
	if len(got) != 1 {
		t.Fatalf("%d rows after the retention passed, want only the new one", len(got))
	}

	off, _, key2 := testenv.SetupOne(t, testenv.JSONAnswer(testenv.CompletionJSON))
	off.Args = []string{"--request-log-days", "0"}
	off.Restart()
	testenv.ReadAll(t, off.Chat(context.Background(), key2, testenv.ChatBody))
	if n := len(requestLog(t, off, "")); n != 0 {
		t.Fatalf("a retention of 0 days kept %d rows", n)
	}
	if u := off.App.Traffic.KeyUsage(off.Clock.Now().Add(-time.Hour)); len(u) == 0 {
		t.Fatal("with the log off the traffic was not counted")
	}
}

// metricSum sums a counter of a Prometheus scrape over every label set the filter keeps (nil:
// all).
func metricSum(metrics, name string, keep func(labels string) bool) float64 {
	var n float64
	for _, line := range strings.Split(metrics, "\n") {
		rest, ok := strings.CutPrefix(line, name+"{")
		if !ok {
			continue
		}
		labels, value, _ := strings.Cut(rest, "} ")
		if keep == nil || keep(labels) {
			v, _ := strconv.ParseFloat(value, 64)
			n += v
		}
	}
	return n
}

// refusedTotal sums switchyard_refused_requests_total over every label set the filter keeps.
func refusedTotal(metrics string, keep func(labels string) bool) float64 {
	return metricSum(metrics, "switchyard_refused_requests_total", keep)
}

// TestRefusedAnonymousRequestsAreCountedNotLogged: requests refused before a client key
// authenticated (no key, a wrong key; any surface, also an unknown address under /v1) never
// become request-log rows, so nobody without a key can rotate the log; the refusals are counted
// in switchyard_refused_requests_total by surface and reason and in the traffic charts.
func TestRefusedAnonymousRequestsAreCountedNotLogged(t *testing.T) {
	e, _, key := testenv.SetupOne(t, testenv.JSONAnswer(testenv.CompletionJSON))
	testenv.ReadAll(t, e.Chat(context.Background(), key, testenv.ChatBody))
	// The request is handed to the log just after its answer went out.
	e.Eventually("the authenticated request is logged", func() bool { return len(requestLog(t, e, "?surface=/v1/chat/completions")) == 1 })
	before := requestLog(t, e, "?limit=500")
	// Anonymous traffic is what the charts keep without a provider and without a key.
	anonymous := func() (sum traffic.Point) {
		for _, p := range e.App.Traffic.Series(traffic.LastHour, func(provider string, keyID int64) bool { return provider == "" && keyID == 0 }) {
			sum.Requests += p.Requests
			for i, n := range p.Errors {
				sum.Errors[i] += n
			}
		}
		return sum
	}
	if a := anonymous(); a.Requests != 0 {
		t.Fatalf("anonymous traffic before any: %+v", a)
	}

	calls := []struct{ method, path, key string }{
		{"POST", "/v1/chat/completions", ""},
		{"POST", "/v1/messages", "sk-sy-not-a-key"},
		{"GET", "/v1/models", ""},
		{"POST", "/v1/responses", "sk-sy-not-a-key"},
		{"GET", "/v1/no-such-surface", ""},
	}
	// From an address of their own: past five wrong keys the address is throttled (429, still a
	// testenv.Refusal), and the admin reading the metrics below must not be.
	anon := testenv.ClientFrom(t, "127.0.0.9")
	const rounds = 20
	for i := 0; i < rounds; i++ {
		for _, c := range calls {
			req, _ := http.NewRequest(c.method, e.Base+c.path, strings.NewReader(testenv.ChatBody))
			req.Header.Set("Content-Type", "application/json")
			if c.key != "" {
				req.Header.Set("x-api-key", c.key)
			}
			resp, err := anon.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			testenv.ReadAll(t, resp)
			if resp.StatusCode < 400 {
				t.Fatalf("%s %s without a valid key: %d", c.method, c.path, resp.StatusCode)
			}
		}
	}
	n := rounds * len(calls)

	// Each refusal is counted just after its answer went out.
	var m string
	e.Eventually("every refusal is counted", func() bool {
		m = e.Metrics()
		return refusedTotal(m, nil) == float64(n) && anonymous().Requests == int64(n)
	})
	if after := requestLog(t, e, "?limit=500"); len(after) != len(before) || after[0].ID != before[0].ID {
		t.Fatalf("%d anonymous refusals added %d request-log rows", n, len(after)-len(before))
	}
	for _, want := range []string{`reason="missing_api_key",surface="/v1/chat/completions"`, `reason="invalid_api_key",surface="/v1/messages"`,
		`surface="/v1/models"`, `surface="/v1/responses"`, `surface="/v1/*"`} {
		if refusedTotal(m, func(l string) bool { return strings.Contains(l, want) }) == 0 {
			t.Errorf("no refusal counted with %s", want)
		}
	}
	// Wrong keys past the address's budget are refused as throttled (429), the rest as client
	// errors: every refusal is an error of one of the two classes.
	if a := anonymous(); a.Errors[traffic.ClassClient]+a.Errors[traffic.ClassRateLimited] != int64(n) || a.Errors[traffic.ClassRateLimited] == 0 {
		t.Fatalf("the traffic aggregates counted %d client errors and %d throttled of %d refusals", a.Errors[traffic.ClassClient],
			a.Errors[traffic.ClassRateLimited], n)
	}
	now := e.App.Traffic.Total(traffic.LastHour)
	// The overview's charts show them (the hour's totals count every request).
	c := e.Login()
	resp, err := c.Get(e.Base + "/overview/traffic?range=hour")
	if err != nil {
		t.Fatal(err)
	}
	if body := testenv.ReadAll(t, resp); resp.StatusCode != 200 || !strings.Contains(body, strconv.FormatInt(now.Requests, 10)) {
		t.Fatalf("overview traffic: %d, %d requests not shown", resp.StatusCode, now.Requests)
	}
}

// checkCounts fails unless a logged request's counts are its chain's: attempt_count its length,
// retries and failovers the steps of those kinds.
func checkCounts(t *testing.T, d loggedRequest) {
	t.Helper()
	kinds := map[string]int{}
	for _, a := range d.Attempts {
		kinds[a.Kind]++
	}
	if d.AttemptCount != len(d.Attempts) || d.Retries != kinds["retry"] || d.Failovers != kinds["failover"] {
		t.Fatalf("counts %d/%d/%d (attempts/retries/failovers) for the chain %+v", d.AttemptCount, d.Retries, d.Failovers, d.Attempts)
	}
}

func requestDetail(t *testing.T, e *testenv.Env, id int64) loggedRequest {
	t.Helper()
	var d loggedRequest
	if code := e.API("GET", fmt.Sprintf("/api/requests/%d", id), nil, &d); code != 200 {
		t.Fatalf("detail: %d", code)
	}
	return d
}

// The request log's retry and failover counts are the attempt chain's: a request that fails over,
// waits out a backoff round and fails over again has 4 attempts, 1 retry and 2 failovers, exactly
// what its chain shows; a request that passes over a connection with a full queue counts no move.
func TestRequestLogCountsMatchTheChain(t *testing.T) {
	var bCalls atomic.Int64
	e, _, key, _, _ := testenv.TwoKeys(t, testenv.ByKey(map[string]http.HandlerFunc{
		"sk-a": testenv.Status(502, nil, `{"error":{"message":"bad gateway"}}`),
		"sk-b": func(w http.ResponseWriter, r *http.Request) {
			if bCalls.Add(1) == 1 {
				testenv.Status(502, nil, `{"error":{"message":"bad gateway"}}`)(w, r)
				return
			}
			testenv.JSONAnswer(testenv.CompletionJSON)(w, r)
		},
	}))
	// Cooldowns shorter than the backoff: the second round finds both connections again.
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 1},
		"circuit_breaker":     map[string]any{"enabled": false},
		"connection_cooldown": map[string]any{"api_key": map[string]any{"base_cooldown_ms": 100}}}, 200)
	res := make(chan *http.Response, 1)
	go func() { res <- e.Chat(context.Background(), key, testenv.ChatBody) }()
	var r *http.Response
	e.Eventually("the backoff round ran", func() bool {
		select {
		case r = <-res:
			return true
		default:
			e.Clock.Advance(time.Second) // the backoff wait before the second round
			return false
		}
	})
	if body := testenv.ReadAll(t, r); r.StatusCode != 200 {
		t.Fatalf("%d %s", r.StatusCode, body)
	}
	logged := requestLog(t, e, "?surface=/v1/chat/completions")
	d := requestDetail(t, e, logged[0].ID)
	var kinds []string
	for _, s := range d.Attempts {
		kinds = append(kinds, s.Connection+":"+s.Kind)
	}
	if strings.Join(kinds, " ") != "a:first b:failover a:retry b:failover" || d.Retries != 1 || d.Failovers != 2 {
		t.Fatalf("chain %v, retries %d, failovers %d", kinds, d.Retries, d.Failovers)
	}
	checkCounts(t, d)

	// A connection at its execution cap is passed over: the request that spills to b makes one
	// attempt, the first, and counts no move.
	g := newGated()
	e2, _, key2, a2, _ := twoKeysBAnswers(t, g.handler)
	e2.MustAPI("PATCH", fmt.Sprintf("/api/connections/%d", a2), map[string]any{"overrides": map[string]any{
		"request_queue": map[string]any{"max_concurrent_executions": 1}}}, 200)
	held := make(chan struct{})
	go func() {
		defer close(held)
		testenv.ReadAll(t, e2.Chat(context.Background(), key2, testenv.ChatBody))
	}()
	<-g.arrived
	if r := e2.Chat(context.Background(), key2, testenv.ChatBody); r.StatusCode != 200 {
		t.Fatalf("past the busy connection: %d %s", r.StatusCode, testenv.ReadAll(t, r))
	} else {
		testenv.ReadAll(t, r)
	}
	spilled := requestDetail(t, e2, requestLog(t, e2, "?surface=/v1/chat/completions")[0].ID)
	if len(spilled.Attempts) != 1 || spilled.Attempts[0].Connection != "b" || spilled.Attempts[0].Kind != "first" {
		t.Fatalf("spilled request %+v", spilled)
	}
	checkCounts(t, spilled)
	close(g.release)
	<-held
}

// A request refused after the client key was accepted is logged with the model it asked for and
// whether it asked for a stream: an unknown model, an ambiguous one, a field named twice, a
// provider without a connection, an open breaker.
func TestRequestLogKeepsWhatRefusedRequestsAskedFor(t *testing.T) {
	e, up, key := testenv.SetupOne(t, testenv.Status(500, nil, `{"error":{"message":"kaboom"}}`))
	other := testenv.NewFakeUpstream(t, testenv.JSONAnswer(testenv.CompletionJSON))
	e.AddProvider("twin", other.URL+"/v1")
	e.AddConnection("twin", "main", "sk-twin", 0)
	e.WaitModels(key, "twin/gpt-test")
	e.AddProvider("empty", up.URL+"/v1")
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0},
		"circuit_breaker": map[string]any{"enabled": true, "failure_threshold": 1}}, 200)
	testenv.ReadAll(t, e.Chat(context.Background(), key, `{"model":"up/gpt-test","messages":[]}`)) // opens up's breaker
	cases := []struct {
		body, model, code string
		stream            bool
		status            int
	}{
		{`{"model":"nobody/nope","stream":true,"messages":[]}`, "nobody/nope", "model_not_found", true, 404},
		{`{"model":"gpt-test","messages":[]}`, "gpt-test", "ambiguous_model", false, 400},
		{`{"model":"twin/gpt-test","stream":true,"messages":[],"stream":true}`, "twin/gpt-test", "duplicate_key", true, 400},
		{`{"model":"empty/gpt-test","stream":true,"messages":[]}`, "gpt-test", "no_executable_targets", true, 404},
		{`{"model":"up/gpt-test","stream":true,"messages":[]}`, "gpt-test", "circuit_open", true, 503},
	}
	for _, c := range cases {
		r := e.Chat(context.Background(), key, c.body)
		if body := testenv.ReadAll(t, r); r.StatusCode != c.status {
			t.Fatalf("%s: %d %s", c.body, r.StatusCode, body)
		}
		got := requestLog(t, e, "?surface=/v1/chat/completions&limit=1")[0]
		var row struct {
			Model     string `json:"model"`
			Stream    bool   `json:"stream"`
			ErrorCode string `json:"error_code"`
		}
		e.API("GET", fmt.Sprintf("/api/requests/%d", got.ID), nil, &row)
		if row.Model != c.model || row.Stream != c.stream || row.ErrorCode != c.code {
			t.Errorf("%s: logged %+v, want model %q stream %v code %s", c.body, row, c.model, c.stream, c.code)
		}
	}
}

// TestRequestLogNamesUpstreamFailuresInWords: a request an upstream refused is listed with its
// reason in the reader's language (Ratenlimit, not rate_limit), on the list and on its page.
func TestRequestLogNamesUpstreamFailuresInWords(t *testing.T) {
	e, _, key := testenv.SetupOne(t, testenv.Status(429, map[string]string{"Retry-After": "60"},
		`{"error":{"message":"Rate limit reached","type":"requests"}}`))
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)
	r := e.Chat(context.Background(), key, testenv.ChatBody)
	if got := testenv.ReadAll(t, r); r.StatusCode != 429 {
		t.Fatalf("chat: %d %s", r.StatusCode, got)
	}
	row := loggedRow(e, r)
	if row["error_code"] != "rate_limit" {
		t.Fatalf("logged error code %v, want rate_limit", row["error_code"])
	}
	id := int64(row["id"].(float64))
	d := newStateDash(t, e)
	for _, lang := range i18n.Langs {
		d.setLang(lang)
		want := `<div class="small err-label">` + d.text("state.reason.rate_limit") + `</div>`
		if list := testenv.Between(d.get("/requests", false), fmt.Sprintf(`id="req-%d"`, id), `</tr>`); !strings.Contains(list, want) {
			t.Errorf("%s: the list names the failure as %q", lang, testenv.Between(list, `err-label">`, `<`))
		}
		if page := d.get(fmt.Sprintf("/requests/%d", id), false); !strings.Contains(page, want) {
			t.Errorf("%s: the request's page names the failure as %q", lang, testenv.Between(page, `err-label">`, `<`))
		}
	}
}
