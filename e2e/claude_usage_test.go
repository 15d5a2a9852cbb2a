package e2e

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/e2e/testenv"
)

// The usage poller reads each account's windows at start and every poll interval (on the fake
// clock); an account at or above the threshold is skipped with reason quota_window until its
// window resets, so traffic moves to the fresher account; the state API and the metrics show
// the windows.
func TestClaudeUsagePollingAndWindowSkipping(t *testing.T) {
	e, f, key := claudeSetup(t, nil)
	now := e.Clock.Now()
	f.SetUsage("ada@example.com", testenv.UsageJSON(100, now.Add(2*time.Hour), 40, now.Add(72*time.Hour)))
	f.SetUsage("bob@example.com", testenv.UsageJSON(20, now.Add(3*time.Hour), 10, now.Add(96*time.Hour)))
	ada := e.AddClaudeAccount(f, "ada@example.com")
	bob := e.AddClaudeAccount(f, "bob@example.com")
	e.MustAPI("PATCH", "/api/connections/"+itoa(bob), map[string]any{"priority": 1}, 200)
	e.WaitModels(key, "anthropic/claude-test")
	e.Eventually("both accounts polled", func() bool {
		return connState(e, ada)["usage"].(map[string]any)["polled_at"] != nil && connState(e, bob)["usage"].(map[string]any)["polled_at"] != nil
	})
	usage := connState(e, ada)["usage"].(map[string]any)
	five := usage["five_hour"].(map[string]any)
	if five["utilization"].(float64) != 100 || usage["seven_day"].(map[string]any)["utilization"].(float64) != 40 || usage["skipped_until"] == nil {
		t.Fatalf("usage %v", usage)
	}
	if at, _ := time.Parse(time.RFC3339, five["resets_at"].(string)); !at.Equal(now.Add(2 * time.Hour).Truncate(time.Second)) {
		t.Fatalf("resets_at %v", five["resets_at"])
	}

	// ada (priority 0) is at its wall: bob serves.
	for range 3 {
		resp := e.PostAnthropic("/v1/messages", key, testenv.MessagesBody, nil)
		if out := testenv.ReadAll(t, resp); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, out)
		}
	}
	for _, r := range f.MessageRequests() {
		if !strings.HasPrefix(bearerOf(r), "sk-ant-oat01-bob-") {
			t.Fatal("a request went to the account at its wall")
		}
	}
	metrics := e.Metrics()
	for _, want := range []string{`switchyard_claude_usage_utilization{connection="claude-1",provider="anthropic",window="five_hour"} 100`,
		`switchyard_claude_usage_utilization{connection="claude-2",provider="anthropic",window="seven_day"} 10`} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("metrics lack %s", want)
		}
	}
	// The reset of each window as a Unix time, and whether each account's lane is active.
	resetSeries := `switchyard_claude_usage_resets_at_seconds{connection="claude-1",provider="anthropic",window="five_hour"} `
	if v, ok := metricValue(metrics, resetSeries); !ok || int64(v) != now.Add(2*time.Hour).Unix() {
		t.Fatalf("%s = %v (%v), want %d", resetSeries, v, ok, now.Add(2*time.Hour).Unix())
	}
	for _, want := range []string{`switchyard_claude_lane_active{connection="claude-1",provider="anthropic"} 0`,
		`switchyard_claude_lane_active{connection="claude-2",provider="anthropic"} 0`} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("metrics lack %s", want)
		}
	}

	// Both at the wall: 429 naming quota_window for each.
	f.SetUsage("bob@example.com", testenv.UsageJSON(100, now.Add(3*time.Hour), 10, now.Add(96*time.Hour)))
	e.Clock.Advance(5 * time.Minute) // the poll interval
	e.Eventually("bob polled at its wall", func() bool { return connState(e, bob)["usage"].(map[string]any)["skipped_until"] != nil })
	resp := e.PostAnthropic("/v1/messages", key, testenv.MessagesBody, nil)
	body := testenv.ReadAll(t, resp)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("both at the wall: %d %s", resp.StatusCode, body)
	}
	var doc struct {
		Diagnostics struct {
			Excluded []struct{ Connection, Reason string } `json:"excluded"`
		} `json:"diagnostics"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil || len(doc.Diagnostics.Excluded) != 2 {
		t.Fatalf("diagnostics: %s", body)
	}
	for _, x := range doc.Diagnostics.Excluded {
		if x.Reason != "quota_window" {
			t.Fatalf("excluded %+v", x)
		}
	}

	// ada's window resets: it serves again, first.
	f.SetUsage("ada@example.com", testenv.UsageJSON(0, now.Add(7*time.Hour), 41, now.Add(72*time.Hour)))
	e.Clock.Advance(2*time.Hour - 5*time.Minute)
	resp = e.PostAnthropic("/v1/messages", key, testenv.MessagesBody, nil)
	if out := testenv.ReadAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("after the reset: %d %s", resp.StatusCode, out)
	}
	reqs := f.MessageRequests()
	if !strings.HasPrefix(bearerOf(reqs[len(reqs)-1]), "sk-ant-oat01-ada-") {
		t.Fatal("the reset account was not used")
	}
}

// The unified headers of every answer update the windows between polls; the wall's 429 marks
// the account until the announced reset, and the poller reads it again at once.
func TestClaudeUnifiedHeadersUpdateUsage(t *testing.T) {
	e, f, key := claudeSetup(t, nil)
	now := e.Clock.Now()
	var wall atomic.Bool
	f.Messages = func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("anthropic-ratelimit-unified-5h-utilization", "0.63")
		h.Set("anthropic-ratelimit-unified-5h-reset", epochS(now.Add(90*time.Minute)))
		h.Set("anthropic-ratelimit-unified-7d-utilization", "0.2")
		h.Set("anthropic-ratelimit-unified-7d-reset", epochS(now.Add(80*time.Hour)))
		if wall.Load() {
			h.Set("anthropic-ratelimit-unified-status", "rejected")
			h.Set("anthropic-ratelimit-unified-reset", epochS(now.Add(90*time.Minute)))
			h.Set("anthropic-ratelimit-unified-representative-claim", "five_hour")
			testenv.AnthropicError(429, "rate_limit_error", "usage limit reached", nil)(w, r)
			return
		}
		h.Set("anthropic-ratelimit-unified-status", "allowed")
		testenv.MessagesAnswer()(w, r)
	}
	id := e.AddClaudeAccount(f, "ada@example.com")
	e.WaitModels(key, "anthropic/claude-test")
	e.Eventually("first poll", func() bool { return connState(e, id)["usage"].(map[string]any)["polled_at"] != nil })
	polls := len(f.Requests("/api/oauth/usage"))
	resp := e.PostAnthropic("/v1/messages", key, testenv.MessagesBody, nil)
	testenv.ReadAll(t, resp)
	five := connState(e, id)["usage"].(map[string]any)["five_hour"].(map[string]any)
	if u := five["utilization"].(float64); u < 62.9 || u > 63.1 {
		t.Fatalf("five_hour %v", five)
	}
	wall.Store(true)
	f.SetUsage("ada@example.com", testenv.UsageJSON(100, now.Add(90*time.Minute), 20, now.Add(80*time.Hour))) // what a poll now says
	e.Clock.Advance(time.Minute)
	resp = e.PostAnthropic("/v1/messages", key, testenv.MessagesBody, nil)
	if testenv.ReadAll(t, resp); resp.StatusCode != 429 {
		t.Fatalf("the wall: %d", resp.StatusCode)
	}
	usage := connState(e, id)["usage"].(map[string]any)
	if usage["five_hour"].(map[string]any)["utilization"].(float64) != 100 || usage["skipped_until"] == nil {
		t.Fatalf("after the wall %v", usage)
	}
	e.Eventually("a poll after the 429", func() bool { return len(f.Requests("/api/oauth/usage")) > polls })
}

func epochS(t time.Time) string { return itoa(t.Unix()) }

// metricValue is the value of the series whose line starts with prefix (name, labels and the
// space), in the Prometheus text format.
func metricValue(metrics, prefix string) (float64, bool) {
	for line := range strings.Lines(metrics) {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// A usage poll under way when the wall's 429 comes answers with what the usage API read before
// it: the wall the 429 announced stays (the account is skipped until its reset), and the poll
// only fills the window the 429 did not speak of.
func TestUsagePollDoesNotUndoTheWall(t *testing.T) {
	s := &wallScript{}
	e, f, key := claudeSetup(t, s.serve)
	release := f.HoldUsage()
	defer release()
	id := e.AddClaudeAccount(f, "ada@example.com") // its first poll reads 0 % and waits
	e.Eventually("the first poll asked", func() bool { return f.UsageCalls.Load() > 0 })
	e.WaitModels(key, "anthropic/claude-test")
	l := &laneEnv{Env: e, f: f, script: s, key: key, id: id, reset: e.Clock.Now().Add(time.Hour)}
	s.push(withHeaders(429, limitMsg, uStatus, "rejected", uReset, epochS(l.reset), uClaim, "five_hour", u5hReset, epochS(l.reset)))
	if st, _ := l.post(); st != 429 {
		t.Fatalf("the wall: %d", st)
	}
	release()
	e.Eventually("the first poll answered", func() bool { return connState(e, id)["usage"].(map[string]any)["polled_at"] != nil })
	usage := connState(e, id)["usage"].(map[string]any)
	five, seven := usage["five_hour"].(map[string]any), usage["seven_day"].(map[string]any)
	if five["utilization"].(float64) != 100 || usage["skipped_until"] == nil || seven["utilization"].(float64) != 0 {
		t.Fatalf("usage after the late poll %v", usage)
	}
}
