package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"switchyard/e2e/testenv"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/collectors"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// chaosProxy puts an in-process toxiproxy between the gateway and a fake upstream.
func chaosProxy(t *testing.T, upstreamURL string) *toxiproxy.Proxy {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	srv.Metrics.ProxyMetrics = collectors.NewProxyMetricCollectors()
	p := toxiproxy.NewProxy(srv, "upstream", "127.0.0.1:0", strings.TrimPrefix(upstreamURL, "http://"))
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

func addToxic(t *testing.T, p *toxiproxy.Proxy, js string) {
	t.Helper()
	if _, err := p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
		t.Fatal(err)
	}
}

// chaosSetup: provider "up" reached through the proxy, one connection, retries off unless asked.
func chaosSetup(t *testing.T, chat http.HandlerFunc) (*testenv.Env, *testenv.FakeUpstream, *toxiproxy.Proxy, string) {
	t.Helper()
	up := testenv.NewFakeUpstream(t, chat)
	p := chaosProxy(t, up.URL)
	e := testenv.New(t)
	e.AddProvider("up", "http://"+p.Listen+"/v1")
	e.AddConnection("up", "main", "sk-main", 0)
	key := e.NewKey()
	e.WaitModels(key, "up/gpt-test")
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 0}}, 200)
	return e, up, p, key
}

// wellFormedError checks an OpenAI-format error body.
func wellFormedError(t *testing.T, body string) map[string]any {
	t.Helper()
	var out struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil || out.Error["message"] == "" || out.Error["code"] == nil {
		t.Fatalf("not a well-formed OpenAI error: %q", body)
	}
	return out.Error
}

// readEvents reads an SSE answer into its data payloads.
func readEvents(t *testing.T, r *http.Response) []string {
	t.Helper()
	defer r.Body.Close()
	var data []string
	sc := bufio.NewScanner(r.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = append(data, d)
		}
	}
	return data
}

func TestChaosSlicedStreamArrivesIntact(t *testing.T) {
	e, _, p, key := chaosSetup(t, testenv.SSEAnswer(testenv.SSEChunks, -1))
	addToxic(t, p, `{"name":"slice","type":"slicer","stream":"downstream","attributes":{"average_size":7,"size_variation":5,"delay":200}}`)
	addToxic(t, p, `{"name":"lag","type":"latency","stream":"downstream","attributes":{"latency":5,"jitter":3}}`)
	for i := 0; i < 5; i++ {
		r := e.Chat(context.Background(), key, `{"model":"up/gpt-test","stream":true,"messages":[]}`)
		got := readEvents(t, r)
		var want []string
		for _, ev := range testenv.SSEChunks {
			want = append(want, strings.TrimPrefix(ev, "data: "))
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("events split across TCP reads were lost or merged:\n%s", strings.Join(got, "\n"))
		}
	}
}

func TestChaosCutStreamEndsWithStreamIncomplete(t *testing.T) {
	e, _, p, key := chaosSetup(t, testenv.SSEAnswer(testenv.SSEChunks, -1))
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"circuit_breaker": map[string]any{"failure_threshold": 1}}, 200)
	// Let the response headers and two events (the role, then the first content) through, then
	// cut the connection inside the third.
	addToxic(t, p, `{"name":"cut","type":"limit_data","stream":"downstream","attributes":{"bytes":540}}`)
	r := e.Chat(context.Background(), key, `{"model":"up/gpt-test","stream":true,"messages":[]}`)
	got := readEvents(t, r)
	if len(got) < 2 || !strings.Contains(got[len(got)-1], `"code":"stream_incomplete"`) {
		t.Fatalf("a cut stream must end with stream_incomplete: %v", got)
	}
	for _, d := range got[:len(got)-1] {
		if !json.Valid([]byte(d)) {
			t.Fatalf("a partial event was relayed: %q", d)
		}
	}
	// The gateway closes its side of the cut connection: no socket towards the proxy stays open
	// (established, or half-closed by the proxy and left unanswered).
	_, port, _ := strings.Cut(p.Listen, ":")
	e.Eventually("the gateway closes its connection to the cut upstream", func() bool { return openConnsTo(t, port) == 0 })
	checkCutStreamVerdict(t, e, "up", "/v1/chat/completions")
}

// checkCutStreamVerdict checks what a stream that broke after its first content reached the
// client leaves behind, the same for every surface and upstream format: the request log records
// an incomplete stream (stream_incomplete); the connection that answered stays active (a cut is
// not the key's fault), and the provider's breaker and health count it as the failure it is (the
// tests set the breaker's threshold to 1, so it opens).
func checkCutStreamVerdict(t *testing.T, e *testenv.Env, provider, surface string) {
	t.Helper()
	var logged map[string]any
	e.Eventually("the request is logged", func() bool {
		var out struct{ Items []map[string]any }
		e.API("GET", "/api/requests?surface="+surface+"&provider="+provider, nil, &out)
		if len(out.Items) > 0 {
			logged = out.Items[0]
		}
		return logged != nil
	})
	if logged["stream"] != true || logged["complete"] != false || logged["status"] != 200.0 || logged["error_code"] != "stream_incomplete" {
		t.Fatalf("request log: %v", logged)
	}
	conn := int64(logged["connection_id"].(float64))
	if s := e.State(conn); s.Status != "active" || s.RemainingMS != 0 || s.BackoffLevel != 0 || s.LastError != "" {
		t.Fatalf("connection after the cut: %+v", s)
	}
	if s := e.ProviderStatus(provider); s["breaker"] != "open" {
		t.Fatalf("provider after the cut: %v", s)
	}
}

// openConnsTo counts the IPv4 TCP sockets of this network namespace that are connected to the
// local port (ESTABLISHED or CLOSE_WAIT), from /proc/net/tcp.
func openConnsTo(t *testing.T, port string) int {
	t.Helper()
	raw, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Skipf("no /proc/net/tcp: %v", err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(":%04X", n)
	count := 0
	for _, line := range strings.Split(string(raw), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		if strings.HasSuffix(f[2], want) && (f[3] == "01" || f[3] == "08") {
			count++
		}
	}
	return count
}

func TestChaosResetPeerIsAWellFormedErrorAndCoolsTheConnection(t *testing.T) {
	e, _, p, key := chaosSetup(t, testenv.JSONAnswer(testenv.CompletionJSON))
	addToxic(t, p, `{"name":"reset","type":"reset_peer","stream":"downstream","attributes":{"timeout":0}}`)
	r := e.Chat(context.Background(), key, testenv.ChatBody)
	body := testenv.ReadAll(t, r)
	if r.StatusCode != 502 {
		t.Fatalf("reset: %d %s", r.StatusCode, body)
	}
	wellFormedError(t, body)
	if st := e.State(e.ConnectionID("main")); st.Status != "cooling" || st.Reason != "server_error" {
		t.Fatalf("reset connection state: %+v", st)
	}
	// The fault goes away and the cooldown ends: traffic flows again.
	if err := p.Toxics.RemoveToxic(context.Background(), "reset"); err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(time.Minute)
	r = e.Chat(context.Background(), key, testenv.ChatBody)
	if body := testenv.ReadAll(t, r); r.StatusCode != 200 || body != testenv.CompletionJSON {
		t.Fatalf("after recovery: %d %s", r.StatusCode, body)
	}
}

// awaitAnswer moves the fake clock on a second at a time until the answer arrives on res: the
// engine's backoff and timeouts run on that clock.
func awaitAnswer(e *testenv.Env, what string, res <-chan *http.Response) *http.Response {
	var r *http.Response
	e.Eventually(what, func() bool {
		e.Clock.Advance(time.Second)
		select {
		case r = <-res:
			return true
		default:
			return false
		}
	})
	return r
}

func TestChaosResetsAreRetriedWithBackoff(t *testing.T) {
	e, up, p, key := chaosSetup(t, testenv.JSONAnswer(testenv.CompletionJSON))
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"retry": map[string]any{"max_retries": 2}}, 200)
	addToxic(t, p, `{"name":"reset","type":"reset_peer","stream":"downstream","attributes":{"timeout":0}}`)
	res := make(chan *http.Response, 1)
	go func() { res <- e.Chat(context.Background(), key, testenv.ChatBody) }()
	// Let the first attempt fail, then heal the upstream and let the backoff run out.
	e.Eventually("first attempt failed", func() bool { return e.State(e.ConnectionID("main")).Status == "cooling" })
	if err := p.Toxics.RemoveToxic(context.Background(), "reset"); err != nil {
		t.Fatal(err)
	}
	r := awaitAnswer(e, "the retry went through", res)
	if len(up.ChatRequests()) < 1 {
		t.Fatal("the upstream never saw the retried request")
	}
	if body := testenv.ReadAll(t, r); r.StatusCode != 200 || body != testenv.CompletionJSON {
		t.Fatalf("retried request: %d %s", r.StatusCode, body)
	}
}

func TestChaosBlackHoleTripsTheBreaker(t *testing.T) {
	e, _, p, key := chaosSetup(t, testenv.JSONAnswer(testenv.CompletionJSON))
	e.MustAPI("PATCH", "/api/settings/resilience", map[string]any{"streams": map[string]any{"first_byte_timeout_ms": 5000},
		// A long breaker timeout: the polling below moves the fake clock by whole seconds and must
		// not reach the probe time however slowly the machine answers.
		"circuit_breaker": map[string]any{"failure_threshold": 2, "timeout_ms": 3600000}}, 200)
	addToxic(t, p, `{"name":"hole","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`)
	for i := 0; i < 2; i++ {
		res := make(chan *http.Response, 1)
		go func() { res <- e.Chat(context.Background(), key, testenv.ChatBody) }()
		r := awaitAnswer(e, "the first-byte timeout fires", res)
		body := testenv.ReadAll(t, r)
		if r.StatusCode != 504 {
			t.Fatalf("black hole %d: %d %s", i, r.StatusCode, body)
		}
		wellFormedError(t, body)
		if i == 0 {
			e.Clock.Advance(time.Minute) // past the connection's cooldown, not past the breaker's timeout
		}
	}
	// The breaker is open now: the next request fails in milliseconds without waiting.
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := e.Chat(ctx, key, testenv.ChatBody)
	body := testenv.ReadAll(t, r)
	if r.StatusCode != 503 || !strings.Contains(body, "circuit breaker is open") {
		t.Fatalf("open breaker: %d %s", r.StatusCode, body)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("an open breaker answered after %v", took)
	}
}
