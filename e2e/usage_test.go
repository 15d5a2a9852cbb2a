package e2e

import (
	"context"
	"encoding/csv"
	"fmt"
	"html"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"switchyard/db"
	"switchyard/e2e/testenv"
	"switchyard/i18n"
)

// usageSums are the numbers of a usage item or total.
type usageSums struct {
	Requests         int64   `json:"requests"`
	Errors           int64   `json:"errors"`
	InputTokens      int64   `json:"input_tokens"`
	OutputTokens     int64   `json:"output_tokens"`
	CacheReadTokens  int64   `json:"cache_read_tokens"`
	CacheWriteTokens int64   `json:"cache_write_tokens"`
	ReasoningTokens  int64   `json:"reasoning_tokens"`
	CostUSD          float64 `json:"cost_usd"`
	UnpricedRequests int64   `json:"unpriced_requests"`
}

type usageItem struct {
	Name     string  `json:"name"`
	KeyID    *int64  `json:"key_id"`
	Provider *string `json:"provider"`
	Model    *string `json:"model"`
	usageSums
}

type usageDoc struct {
	From    time.Time   `json:"from"`
	To      time.Time   `json:"to"`
	GroupBy string      `json:"group_by"`
	Items   []usageItem `json:"items"`
	Total   usageSums   `json:"total"`
}

// loggedUsage is a request-log row with the numbers usage sums.
type loggedUsage struct {
	ClientKeyID      int64    `json:"client_key_id"`
	Provider         string   `json:"provider"`
	Model            string   `json:"model"`
	Status           int      `json:"status"`
	InputTokens      int64    `json:"input_tokens"`
	OutputTokens     int64    `json:"output_tokens"`
	CacheReadTokens  int64    `json:"cache_read_tokens"`
	CacheWriteTokens int64    `json:"cache_write_tokens"`
	ReasoningTokens  int64    `json:"reasoning_tokens"`
	CostUSD          *float64 `json:"cost_usd"`
}

func getUsage(t *testing.T, e *testenv.Env, query string) usageDoc {
	t.Helper()
	var doc usageDoc
	if code := e.API("GET", "/api/usage"+query, nil, &doc); code != 200 {
		t.Fatalf("GET /api/usage%s: %d", query, code)
	}
	return doc
}

// completion is a chat completion that used these tokens.
func usageCompletion(prompt, cached, completion, reasoning int) http.HandlerFunc {
	return testenv.JSONAnswer(fmt.Sprintf(`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,`+
		`"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,`+
		`"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d},"completion_tokens_details":{"reasoning_tokens":%d}}}`,
		prompt, completion, prompt+completion, cached, reasoning))
}

// TestUsageAgreesWithTheRequestLog: real requests of two keys through the proxy (answered,
// refused upstream, for a model nobody serves) are summed by /api/usage exactly as the request
// log has them, by key, provider and model; the CSV of each grouping has the same rows; bad
// queries are refused with the field named; the API needs the admin's credentials.
func TestUsageAgreesWithTheRequestLog(t *testing.T) {
	up := testenv.NewFakeUpstream(t, testenv.PerModel(map[string]http.HandlerFunc{
		"gpt-big":   usageCompletion(1200, 1000, 300, 120),
		"gpt-small": usageCompletion(40, 0, 8, 0),
		"gpt-bad":   testenv.Status(400, nil, `{"error":{"message":"bad request","type":"invalid_request_error"}}`),
	}), "gpt-big", "gpt-small", "gpt-bad")
	other := testenv.NewFakeUpstream(t, usageCompletion(7, 2, 5, 1), "mini")
	e := testenv.New(t)
	e.AddProvider("up", up.URL+"/v1")
	e.AddProvider("other", other.URL+"/v1")
	e.AddConnection("up", "main", "sk-up", 0)
	e.AddConnection("other", "main", "sk-other", 0)
	alice := e.MustAPI("POST", "/api/keys", map[string]any{"name": "alice"}, 201)
	bob := e.MustAPI("POST", "/api/keys", map[string]any{"name": "bob"}, 201)
	aliceKey, bobKey := alice["key"].(string), bob["key"].(string)
	aliceID, bobID := int64(alice["id"].(float64)), int64(bob["id"].(float64))
	e.WaitModels(aliceKey, "up/gpt-big")
	e.WaitModels(aliceKey, "other/mini")

	var lastID string // the last request's X-Request-Id: its row is written just after its answer
	send := func(key, model string, n int) {
		for range n {
			r := e.Chat(context.Background(), key, `{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`)
			testenv.ReadAll(t, r)
			lastID = r.Header.Get("X-Request-Id")
		}
	}
	send(aliceKey, "up/gpt-big", 3)
	send(aliceKey, "up/gpt-small", 2)
	send(aliceKey, "up/gpt-bad", 1)
	send(bobKey, "other/mini", 4)
	send(bobKey, "up/gpt-small", 1)
	send(bobKey, "nobody/serves-this", 1)

	var log struct{ Items []loggedUsage }
	e.Eventually("the last request is logged", func() bool {
		var newest struct {
			Items []struct {
				RequestID string `json:"request_id"`
			} `json:"items"`
		}
		return e.API("GET", "/api/requests?limit=1", nil, &newest) == 200 && len(newest.Items) == 1 && newest.Items[0].RequestID == lastID
	})
	if code := e.API("GET", "/api/requests?limit=500", nil, &log); code != 200 {
		t.Fatalf("request log: %d", code)
	}
	// What the request log says, summed per group as the usage API must.
	want := map[string]map[string]usageSums{"key": {}, "provider": {}, "model": {}}
	var total usageSums
	add := func(m map[string]usageSums, k string, r loggedUsage) {
		s := m[k]
		s.Requests++
		if r.Status >= 400 {
			s.Errors++
		}
		s.InputTokens += r.InputTokens
		s.OutputTokens += r.OutputTokens
		s.CacheReadTokens += r.CacheReadTokens
		s.CacheWriteTokens += r.CacheWriteTokens
		s.ReasoningTokens += r.ReasoningTokens
		if r.CostUSD != nil {
			s.CostUSD += *r.CostUSD
		} else if r.InputTokens+r.OutputTokens > 0 {
			s.UnpricedRequests++
		}
		m[k] = s
	}
	chats := 0
	for _, r := range log.Items {
		if r.ClientKeyID == 0 {
			t.Fatalf("a logged request without a key: %+v", r)
		}
		add(want["key"], strconv.FormatInt(r.ClientKeyID, 10), r)
		add(want["provider"], r.Provider, r)
		add(want["model"], r.Provider+"\x00"+r.Model, r)
		m := map[string]usageSums{}
		add(m, "", r)
		total = addSums(total, m[""])
		if r.Model != "" {
			chats++
		}
	}
	if chats != 12 || total.InputTokens == 0 || total.Errors < 2 {
		t.Fatalf("the log has %d chat requests (want 12), %+v", chats, total)
	}

	for _, by := range []string{"key", "provider", "model"} {
		t.Run("by "+by, func(t *testing.T) {
			doc := getUsage(t, e, "?group_by="+by)
			if doc.GroupBy != by || !sameUsage(doc.Total, total) {
				t.Fatalf("total %+v, the log sums to %+v", doc.Total, total)
			}
			if len(doc.Items) != len(want[by]) {
				t.Fatalf("%d items, the log has %d groups: %+v", len(doc.Items), len(want[by]), doc.Items)
			}
			for i, it := range doc.Items {
				var k, name string
				switch by {
				case "key":
					if it.KeyID == nil || it.Provider != nil || it.Model != nil {
						t.Fatalf("item %+v: want key_id alone", it)
					}
					k, name = strconv.FormatInt(*it.KeyID, 10), map[int64]string{aliceID: "alice", bobID: "bob"}[*it.KeyID]
				case "provider":
					if it.KeyID != nil || it.Provider == nil || it.Model != nil {
						t.Fatalf("item %+v: want provider alone", it)
					}
					k, name = *it.Provider, *it.Provider
				case "model":
					if it.KeyID != nil || it.Provider == nil || it.Model == nil {
						t.Fatalf("item %+v: want provider and model", it)
					}
					k, name = *it.Provider+"\x00"+*it.Model, *it.Provider+"/"+*it.Model
					if *it.Provider == "" {
						name = *it.Model
					}
				}
				if it.Name != name || !sameUsage(it.usageSums, want[by][k]) {
					t.Errorf("item %q: %+v, the log has %q %+v", it.Name, it.usageSums, name, want[by][k])
				}
				if i > 0 {
					prev := doc.Items[i-1]
					if prev.CostUSD < it.CostUSD || (prev.CostUSD == it.CostUSD && prev.Requests < it.Requests) {
						t.Errorf("items not by cost then requests: %q before %q", prev.Name, it.Name)
					}
				}
			}

			// The CSV of the same query has the same rows.
			code, head, body := fetchCSV(t, e, "?group_by="+by)
			if code != 200 || !strings.HasPrefix(head.Get("Content-Type"), "text/csv") ||
				!strings.HasPrefix(head.Get("Content-Disposition"), `attachment; filename="switchyard-usage-`+by+"-") {
				t.Fatalf("CSV: %d %v", code, head)
			}
			rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
			if err != nil || len(rows) != len(doc.Items)+1 {
				t.Fatalf("CSV of %d rows (want %d and a header): %v\n%s", len(rows), len(doc.Items), err, body)
			}
			skip := map[string]int{"key": 2, "provider": 1, "model": 2}[by]
			if rows[0][skip] != "requests" || rows[0][len(rows[0])-2] != "cost_usd" {
				t.Fatalf("header %v", rows[0])
			}
			for i, it := range doc.Items {
				s := it.usageSums
				wantRow := []string{}
				switch by {
				case "key":
					wantRow = append(wantRow, strconv.FormatInt(*it.KeyID, 10), it.Name)
				case "provider":
					wantRow = append(wantRow, *it.Provider)
				case "model":
					wantRow = append(wantRow, *it.Provider, *it.Model)
				}
				for _, n := range []int64{s.Requests, s.Errors, s.InputTokens, s.OutputTokens, s.CacheReadTokens, s.CacheWriteTokens, s.ReasoningTokens} {
					wantRow = append(wantRow, strconv.FormatInt(n, 10))
				}
				wantRow = append(wantRow, strconv.FormatFloat(s.CostUSD, 'f', -1, 64), strconv.FormatInt(s.UnpricedRequests, 10))
				if strings.Join(rows[i+1], "|") != strings.Join(wantRow, "|") {
					t.Errorf("CSV row %d: %v, want %v", i+1, rows[i+1], wantRow)
				}
			}
		})
	}

	t.Run("the default range is the last 24 hours, in whole quarter hours", func(t *testing.T) {
		doc := getUsage(t, e, "")
		now := e.Clock.Now()
		if doc.GroupBy != "key" || doc.To.Sub(doc.From) != 24*time.Hour || doc.To.Before(now) || doc.To.Sub(now) > 15*time.Minute ||
			doc.To.Unix()%900 != 0 {
			t.Fatalf("default range %v – %v at %v", doc.From, doc.To, now)
		}
		// A range that ended before the requests has none of them.
		before := strconv.FormatInt(now.Add(-2*time.Hour).Unix(), 10)
		if d := getUsage(t, e, "?to="+before); len(d.Items) != 0 || d.Total.Requests != 0 {
			t.Fatalf("an earlier range: %+v", d)
		}
		// Later, the same requests are still there in a range that names them.
		e.Clock.Advance(36 * time.Hour)
		if d := getUsage(t, e, ""); d.Total.Requests != 0 {
			t.Fatalf("36 hours later the last 24 hours still show %+v", d.Total)
		}
		from := url.QueryEscape(now.Add(-time.Hour).Format(time.RFC3339))
		if d := getUsage(t, e, "?from="+from); !sameUsage(d.Total, total) {
			t.Fatalf("from an hour before them: %+v, want %+v", d.Total, total)
		}
	})

	t.Run("bad queries", func(t *testing.T) {
		for query, field := range map[string]string{
			"?group_by=connection":                               "group_by",
			"?from=1772323200000":                                "from",
			"?from=tomorrow":                                     "from",
			"?from=1772409600&to=17723":                          "to",
			"?from=2024-01-01T00:00:00Z&to=2025-02-05T00:00:01Z": "to",
		} {
			for _, path := range []string{"/api/usage", "/api/usage.csv"} {
				var out struct {
					Error struct {
						Code   string            `json:"code"`
						Fields map[string]string `json:"fields"`
					} `json:"error"`
				}
				if code := e.API("GET", path+query, nil, &out); code != 422 || out.Error.Fields[field] == "" {
					t.Errorf("%s%s: %d %+v, want 422 naming %s", path, query, code, out, field)
				}
			}
		}
	})

	t.Run("admin only", func(t *testing.T) {
		for _, path := range []string{"/api/usage", "/api/usage.csv"} {
			r, err := http.Get(e.Base + path)
			if err != nil {
				t.Fatal(err)
			}
			r.Body.Close()
			if r.StatusCode != 401 {
				t.Errorf("%s without credentials: %d", path, r.StatusCode)
			}
			req, _ := http.NewRequest("GET", e.Base+path, nil)
			req.Header.Set("Authorization", "Bearer "+aliceKey)
			r, err = http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			r.Body.Close()
			if r.StatusCode != 401 {
				t.Errorf("%s with a client key: %d", path, r.StatusCode)
			}
		}
	})
}

// TestUsageCost: spend comes from the buckets as stored (costs and requests without a price,
// kept apart), a deleted key is named by its id, and items sort by cost, then requests. The
// buckets are written the way the request log writes them, to the gateway's own database.
func TestUsageCost(t *testing.T) {
	e := testenv.New(t)
	laptop := int64(e.MustAPI("POST", "/api/keys", map[string]any{"name": "laptop"}, 201)["id"].(float64))
	agent := int64(e.MustAPI("POST", "/api/keys", map[string]any{"name": "agent"}, 201)["id"].(float64))
	b := e.Clock.Now().Add(-time.Hour).Unix() / db.UsageBucketSeconds
	rows := []db.UsageBucket{
		{Bucket: b, KeyID: laptop, Provider: "openai", Model: "gpt-5", ConnectionID: 1, Requests: 10, InputTokens: 10000,
			OutputTokens: 2000, CacheReadTokens: 8000, CostUSD: 0.125},
		{Bucket: b + 1, KeyID: laptop, Provider: "openai", Model: "gpt-5", ConnectionID: 2, Requests: 2, InputTokens: 100,
			OutputTokens: 20, CostUSD: 0.5},
		{Bucket: b, KeyID: agent, Provider: "local", Model: "llama", ConnectionID: 3, Requests: 50, InputTokens: 5000,
			OutputTokens: 500, Unpriced: 50},
		{Bucket: b, KeyID: agent, Provider: "openai", Model: "gpt-5", ConnectionID: 1, Requests: 1, InputTokens: 10,
			OutputTokens: 1, CostUSD: 2.25, Errors: 1},
		{Bucket: b + 2, KeyID: 999, Provider: "local", Model: "llama", ConnectionID: 3, Requests: 3, InputTokens: 30, OutputTokens: 3,
			Unpriced: 3},
		{Bucket: b - 200, KeyID: agent, Provider: "openai", Model: "gpt-5", ConnectionID: 1, Requests: 7, CostUSD: 70}, // 2 days ago
	}
	if err := db.UpsertUsageBuckets(context.Background(), e.App.DB.W, rows); err != nil {
		t.Fatal(err)
	}

	doc := getUsage(t, e, "?group_by=key")
	type got struct {
		Name     string
		Requests int64
		Cost     float64
		Unpriced int64
	}
	var items []got
	for _, it := range doc.Items {
		items = append(items, got{it.Name, it.Requests, math.Round(it.CostUSD*1e9) / 1e9, it.UnpricedRequests})
	}
	want := []got{{"agent", 51, 2.25, 50}, {"laptop", 12, 0.625, 0}, {"#999", 3, 0, 3}}
	if fmt.Sprint(items) != fmt.Sprint(want) {
		t.Fatalf("by key %v, want %v", items, want)
	}
	if math.Abs(doc.Total.CostUSD-2.875) > 1e-9 || doc.Total.UnpricedRequests != 53 || doc.Total.Requests != 66 || doc.Total.CacheReadTokens != 8000 {
		t.Fatalf("total %+v", doc.Total)
	}
	m := getUsage(t, e, "?group_by=model")
	if len(m.Items) != 2 || m.Items[0].Name != "openai/gpt-5" || math.Abs(m.Items[0].CostUSD-2.875) > 1e-9 ||
		m.Items[1].Name != "local/llama" || m.Items[1].CostUSD != 0 || m.Items[1].UnpricedRequests != 53 {
		t.Fatalf("by model %+v", m.Items)
	}
	week := getUsage(t, e, "?group_by=provider&from="+strconv.FormatInt(e.Clock.Now().Add(-7*24*time.Hour).Unix(), 10))
	if len(week.Items) != 2 || math.Abs(week.Items[0].CostUSD-72.875) > 1e-9 || week.Items[0].Requests != 20 {
		t.Fatalf("the last 7 days by provider %+v", week.Items)
	}
	_, _, body := fetchCSV(t, e, "?group_by=key")
	if !strings.Contains(body, "\n999,#999,3,0,30,3,0,0,0,0,3\n") || !strings.Contains(body, ",0.625,0\n") {
		t.Fatalf("CSV:\n%s", body)
	}

	t.Run("the usage page", func(t *testing.T) {
		c := e.Login()
		for _, lang := range i18n.Langs {
			testenv.Fetch(t, c, "GET", e.Base+"/lang/"+string(lang)+"?next=/usage", nil, nil)
			code, page := testenv.Fetch(t, c, "GET", e.Base+"/usage", nil, nil)
			if code != 200 || !strings.Contains(page, `id="usage-by-key"`) || !strings.Contains(page, `id="chart-spend"`) {
				t.Fatalf("%s /usage: %d", lang, code)
			}
			row := testenv.Between(page, `id="usage-by-key"`, `</section>`)
			for _, s := range []string{"agent", "laptop", "#999", testenv.Esc(lang, "usage.by.key"),
				html.EscapeString(i18n.TL(lang, "usage.plus_no_price_for", "50")), "/keys#key-" + strconv.FormatInt(agent, 10)} {
				if !strings.Contains(row, s) {
					t.Errorf("%s: the key table lacks %q", lang, s)
				}
			}
			model := testenv.Between(page, `id="usage-by-model"`, `</section>`)
			if !strings.Contains(model, i18n.TL(lang, "usage.no_price_for", "53")) {
				t.Errorf("%s: a model without a price must say so, not 0 USD: %s", lang, model)
			}
			csvLink := testenv.Between(page, `id="usage-csv-provider" href="`, `"`)
			if !strings.HasPrefix(csvLink, "/api/usage.csv?group_by=provider&amp;from=") {
				t.Fatalf("%s: CSV link %q", lang, csvLink)
			}
			code, _, csvBody := fetchWith(t, c, e.Base+strings.ReplaceAll(csvLink, "&amp;", "&"))
			if code != 200 || !strings.HasPrefix(csvBody, "provider,requests,") {
				t.Fatalf("%s: the page's CSV link with the session: %d %q", lang, code, csvBody)
			}
		}
		code, page := testenv.Fetch(t, c, "GET", e.Base+"/usage?range=month", nil, nil)
		if code != 200 || !strings.Contains(page, `id="usage-range-month" href="/usage?range=month" class="active"`) ||
			!strings.Contains(page, `data-local="date"`) {
			t.Fatalf("30 days: %d", code)
		}
	})
}

// TestUsagePageEmpty: without traffic the page says so and offers no tables.
func TestUsagePageEmpty(t *testing.T) {
	e := testenv.New(t)
	c := e.Login()
	code, page := testenv.Fetch(t, c, "GET", e.Base+"/usage", nil, nil)
	if code != 200 || !strings.Contains(page, `id="usage-empty"`) || strings.Contains(page, `id="usage-by-key"`) ||
		!strings.Contains(page, testenv.Esc(i18n.EN, "usage.empty.day")) || !strings.Contains(page, `id="nav-usage"`) {
		t.Fatalf("empty usage page: %d", code)
	}
}

func fetchCSV(t *testing.T, e *testenv.Env, query string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", e.Base+"/api/usage.csv"+query, nil)
	req.Header.Set("Authorization", "Bearer "+testenv.AdminToken)
	return usageFetch(t, http.DefaultClient, req)
}

func fetchWith(t *testing.T, c *http.Client, u string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	return usageFetch(t, c, req)
}

func usageFetch(t *testing.T, c *http.Client, req *http.Request) (int, http.Header, string) {
	t.Helper()
	r, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r.StatusCode, r.Header, string(b)
}

func addSums(a, b usageSums) usageSums {
	a.Requests += b.Requests
	a.Errors += b.Errors
	a.InputTokens += b.InputTokens
	a.OutputTokens += b.OutputTokens
	a.CacheReadTokens += b.CacheReadTokens
	a.CacheWriteTokens += b.CacheWriteTokens
	a.ReasoningTokens += b.ReasoningTokens
	a.CostUSD += b.CostUSD
	a.UnpricedRequests += b.UnpricedRequests
	return a
}

// sameUsage compares sums: counts exactly, costs to a billionth of a dollar (they are summed in
// another order).
func sameUsage(a, b usageSums) bool {
	ca, cb := a.CostUSD, b.CostUSD
	a.CostUSD, b.CostUSD = 0, 0
	return a == b && math.Abs(ca-cb) < 1e-9
}
