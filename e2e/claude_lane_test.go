package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/e2e/testenv"
)

// wallScript plays Anthropic's side of the usage wall: each POST /v1/messages takes the next
// scripted answer (a 200 when none is left) and is recorded with whether it carried
// anthropic-usage-limit: slow.
type wallScript struct {
	mu      sync.Mutex
	answers []func(w http.ResponseWriter, r *http.Request)
	slow    []bool
}

func (s *wallScript) push(a ...func(w http.ResponseWriter, r *http.Request)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answers = append(s.answers, a...)
}

func (s *wallScript) sent() []bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]bool(nil), s.slow...)
}

func (s *wallScript) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.slow = append(s.slow, r.Header.Get("anthropic-usage-limit") == "slow")
	var a func(http.ResponseWriter, *http.Request)
	if len(s.answers) > 0 {
		a, s.answers = s.answers[0], s.answers[1:]
	}
	s.mu.Unlock()
	if a == nil {
		a = ok(nil)
	}
	a(w, r)
}

// withHeaders answers status and body with the unified headers kv.
func withHeaders(status int, body string, kv ...string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(kv); i += 2 {
			w.Header().Set(kv[i], kv[i+1])
		}
		if status == 200 {
			testenv.MessagesAnswer()(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

const (
	uStatus  = "anthropic-ratelimit-unified-status"
	uReset   = "anthropic-ratelimit-unified-reset"
	uClaim   = "anthropic-ratelimit-unified-representative-claim"
	u5hReset = "anthropic-ratelimit-unified-5h-reset"
	sOffer   = "anthropic-ratelimit-unified-slow-offer"
	sStatus  = "anthropic-ratelimit-unified-slow-status"
	sRetry   = "anthropic-ratelimit-unified-slow-retry-after"
	sMaxWait = "anthropic-ratelimit-unified-slow-max-wait"
	sBudget  = "anthropic-ratelimit-unified-slow-budget-reset"
	uOverage = "anthropic-ratelimit-unified-overage-in-use"
	limitMsg = `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your account's rate limit. Please try again later."}}`
)

// laneEnv is one Claude account with the lane (and limit reset when asked) on, whose 5-hour
// window resets in an hour.
type laneEnv struct {
	*testenv.Env
	f      *testenv.FakeClaude
	script *wallScript
	key    string
	id     int64
	reset  time.Time
}

func newLaneEnv(t *testing.T, lane, limitReset bool) *laneEnv {
	t.Helper()
	s := &wallScript{}
	e, f, key := claudeSetup(t, s.serve)
	id := e.AddClaudeAccount(f, "ada@example.com")
	e.MustAPI("PATCH", "/api/connections/"+itoa(id), map[string]any{"low_priority_lane": lane, "limit_reset": limitReset}, 200)
	e.WaitModels(key, "anthropic/claude-test")
	return &laneEnv{Env: e, f: f, script: s, key: key, id: id, reset: e.Clock.Now().Add(time.Hour)}
}

// laneAfterReset is a lane with limit resets whose reset claim answers result: the wall's
// request is served in the lane all the same.
func laneAfterReset(t *testing.T, result string) *laneEnv {
	t.Helper()
	l := newLaneEnv(t, true, true)
	l.f.Reset.Store(result)
	l.script.push(l.wall("treatment"), l.slow(200, "active"))
	if st, _ := l.post(); st != 200 {
		t.Fatal("not served")
	}
	return l
}

// wall is the 5-hour wall's 429, with the slow offer unless offer is "".
func (l *laneEnv) wall(offer string, kv ...string) func(http.ResponseWriter, *http.Request) {
	h := []string{uStatus, "rejected", uReset, epochS(l.reset), uClaim, "five_hour", u5hReset, epochS(l.reset)}
	if offer != "" {
		h = append(h, sOffer, offer)
	}
	answer := withHeaders(429, limitMsg, append(h, kv...)...)
	return func(w http.ResponseWriter, r *http.Request) {
		// The usage API agrees with the wall, as Anthropic's does: the poll a 429 asks for must
		// find the window full, whenever it lands.
		l.f.SetUsage("ada@example.com", testenv.UsageJSON(100, l.reset, 0, l.reset.Add(100*time.Hour)))
		answer(w, r)
	}
}

// slow is an answer in the lane with a slow status.
func (l *laneEnv) slow(status int, slowStatus string, kv ...string) func(http.ResponseWriter, *http.Request) {
	h := []string{uStatus, "allowed", u5hReset, epochS(l.reset)}
	if slowStatus != "" {
		h = append(h, sStatus, slowStatus)
	}
	body := limitMsg
	if status == 529 {
		body = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	}
	return withHeaders(status, body, append(h, kv...)...)
}

func (l *laneEnv) post() (int, string) {
	l.T.Helper()
	resp := l.PostAnthropic("/v1/messages", l.key, testenv.MessagesBody, nil)
	body := testenv.ReadAll(l.T, resp)
	return resp.StatusCode, body
}

func (l *laneEnv) lane() map[string]any {
	l.T.Helper()
	return connState(l.Env, l.id)["lane"].(map[string]any)
}

func ok(kv []string) func(http.ResponseWriter, *http.Request) { return withHeaders(200, "", kv...) }

// At the wall with the lane on, the offer is accepted: the same request is sent again on the
// same account with anthropic-usage-limit: slow and succeeds; the connection is not cooled; the
// lane stays until the announced reset + 60 s and every request meanwhile carries the header.
func TestLaneAcceptAndActive(t *testing.T) {
	l := newLaneEnv(t, true, false)
	l.script.push(l.wall("treatment"), l.slow(200, "active"))
	if st, body := l.post(); st != 200 {
		t.Fatalf("%d %s", st, body)
	}
	if got := l.script.sent(); len(got) != 2 || got[0] || !got[1] {
		t.Fatalf("slow header per call %v", got)
	}
	if st := l.State(l.id); st.Status != "active" {
		t.Fatalf("the intercepted 429 cooled the connection: %+v", st)
	}
	lane := l.lane()
	until, _ := time.Parse(time.RFC3339, lane["accepted_until"].(string))
	if lane["state"] != "accepted" || !until.Equal(l.reset.Add(time.Minute).Truncate(time.Second)) {
		t.Fatalf("lane %v", lane)
	}
	l.script.push(l.slow(200, "not_needed"))
	if st, _ := l.post(); st != 200 || !l.script.sent()[2] {
		t.Fatal("a request in the active lane went without the slow header")
	}
	// Past the reset + 60 s the lane is over: requests go without the header again.
	l.Clock.Advance(time.Hour + time.Minute)
	l.reset = l.Clock.Now().Add(5 * time.Hour)
	if st, _ := l.post(); st != 200 || l.script.sent()[3] {
		t.Fatal("the lane outlived its window")
	}
	if lane := l.lane(); lane["state"] != "idle" {
		t.Fatalf("lane after the window %v", lane)
	}
}

// Without the offer, or with the lane off, the wall takes the normal path: the client gets the
// 429 and the connection cools.
func TestLaneNotOfferedOrOff(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lane  bool
		offer string
	}{{"lane off", false, "treatment"}, {"control arm", true, "control"}, {"no offer", true, ""}} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLaneEnv(t, tc.lane, false)
			l.script.push(l.wall(tc.offer))
			if st, _ := l.post(); st != 429 {
				t.Fatalf("status %d", st)
			}
			if got := l.script.sent(); len(got) != 1 {
				t.Fatalf("calls %v", got)
			}
			if st := l.State(l.id); st.Status != "cooling" {
				t.Fatalf("state %+v", st)
			}
		})
	}
}

// slot_busy (429) and 529 in the lane wait the announced slow-retry-after (±30 %) and try again on
// the same account; a streaming client gets heartbeats while it waits, and the lane shows the
// waiting request.
func TestLaneSlotBusyWaits(t *testing.T) {
	l := newLaneEnv(t, true, false)
	l.script.push(l.wall("treatment"), l.slow(429, "slot_busy", sRetry, "60"), l.slow(529, "", sRetry, "30"), l.slow(200, "active"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", l.Base+"/v1/messages",
			strings.NewReader(strings.Replace(testenv.MessagesBody, `"max_tokens":64`, `"max_tokens":64,"stream":true`, 1)))
		req.Header.Set("x-api-key", l.key)
		resp, err := testenv.ChatClient.Do(req)
		if err != nil {
			close(got)
			return
		}
		got <- resp
	}()
	l.Eventually("waiting for a slot", func() bool { return l.lane()["waiting"].(float64) == 1 })
	if l.lane()["state"] != "waiting" {
		t.Fatalf("lane %v", l.lane())
	}
	// The first heartbeat commits the stream: the client has its answer's head and a comment.
	l.Clock.Advance(15 * time.Second)
	resp, ok := <-got
	if !ok {
		t.Fatal("the streaming request failed")
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != ": queued\n" {
		t.Fatalf("first line %q %v", line, err)
	}
	if len(l.script.sent()) != 2 {
		t.Fatal("tried again before the slot wait ended")
	}
	l.Clock.Advance(63 * time.Second) // 60 s + 30 % in all
	l.Eventually("the 529", func() bool { return len(l.script.sent()) == 3 })
	l.Eventually("waiting again", func() bool { return l.lane()["waiting"].(float64) == 1 })
	l.Clock.Advance(39 * time.Second) // 30 s + 30 %
	var stream strings.Builder
	for {
		line, err := br.ReadString('\n')
		stream.WriteString(line)
		if err != nil || strings.Contains(line, "message_stop") {
			break
		}
	}
	if !strings.Contains(stream.String(), "message_stop") {
		t.Fatalf("stream %q", stream.String())
	}
	if got := l.script.sent(); len(got) != 4 || !got[1] || !got[2] || !got[3] {
		t.Fatalf("calls %v", got)
	}
	if st := l.State(l.id); st.Status != "active" {
		t.Fatalf("the waits cooled the connection: %+v", st)
	}
}

// A wait that would pass the max wait ends the lane (max_wait): the answer takes the normal
// path and the lane is not accepted again during the cool-off.
func TestLaneMaxWaitEndsWithCoolOff(t *testing.T) {
	l := newLaneEnv(t, true, false)
	l.script.push(l.wall("treatment"), l.slow(429, "slot_busy", sRetry, "600", sMaxWait, "60"))
	if st, _ := l.post(); st != 429 {
		t.Fatalf("status %d", st)
	}
	lane := l.lane()
	if lane["state"] != "cooling_off" || lane["end_reason"] != "max_wait" || lane["cool_off_until"] == nil {
		t.Fatalf("lane %v", lane)
	}
	if st := l.State(l.id); st.Status != "cooling" {
		t.Fatalf("the ended lane's answer did not take the normal path: %+v", st)
	}
	// Past the connection cooldown, within the 10 min cool-off: the account is at its wall and
	// its lane cannot take it, so it is left out (quota_window) without a call.
	l.Clock.Advance(time.Minute)
	if st, body := l.post(); st != 429 || len(l.script.sent()) != 2 || !strings.Contains(body, "quota_window") {
		t.Fatalf("during the cool-off: %d %s, calls %v", st, body, l.script.sent())
	}
	l.Clock.Advance(10 * time.Minute)
	l.script.push(l.wall("treatment"), l.slow(200, "active"))
	if st, _ := l.post(); st != 200 {
		t.Fatal("not accepted after the cool-off")
	}
}

// weekly_limit, budget_exhausted, off, ineligible and overage in use end the lane; the answer
// takes the normal path. budget_exhausted is remembered until the budget resets.
func TestLaneEnds(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		answer       func(l *laneEnv) func(http.ResponseWriter, *http.Request)
		status       int
	}{
		{"weekly limit", "weekly_limit", func(l *laneEnv) func(http.ResponseWriter, *http.Request) { return l.slow(429, "weekly_limit") }, 429},
		{"budget exhausted", "budget_exhausted", func(l *laneEnv) func(http.ResponseWriter, *http.Request) {
			return l.slow(429, "budget_exhausted", sBudget, epochS(l.Clock.Now().Add(48*time.Hour)))
		}, 429},
		{"off", "off", func(l *laneEnv) func(http.ResponseWriter, *http.Request) { return l.slow(429, "off") }, 429},
		{"ineligible", "ineligible", func(l *laneEnv) func(http.ResponseWriter, *http.Request) { return l.slow(429, "ineligible") }, 429},
		{"overage in use", "extra_usage", func(l *laneEnv) func(http.ResponseWriter, *http.Request) {
			return l.slow(200, "active", uOverage, "true")
		}, 200},
		{"a new 5-hour window", "new_window", func(l *laneEnv) func(http.ResponseWriter, *http.Request) {
			return ok([]string{uStatus, "allowed", u5hReset, epochS(l.Clock.Now().Add(5 * time.Hour))})
		}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLaneEnv(t, true, false)
			l.script.push(l.wall("treatment"), l.slow(200, "active"))
			if st, _ := l.post(); st != 200 {
				t.Fatal("not accepted")
			}
			l.script.push(tc.answer(l))
			if st, _ := l.post(); st != tc.status {
				t.Fatalf("status %d, want %d", st, tc.status)
			}
			lane := l.lane()
			if lane["end_reason"] != tc.reason || lane["accepted_until"] != nil {
				t.Fatalf("lane %v", lane)
			}
			if tc.status == 429 && l.State(l.id).Status != "cooling" {
				t.Fatal("the answer did not take the normal cooldown path")
			}
			if tc.reason == "budget_exhausted" {
				if lane["state"] != "budget_exhausted" {
					t.Fatalf("lane %v", lane)
				}
				l.Clock.Advance(time.Hour)
				l.script.push(l.wall("treatment"))
				if st, _ := l.post(); st != 429 || len(l.script.sent()) != 4 {
					t.Fatal("accepted again while the budget is exhausted")
				}
			}
		})
	}
}

// With limit reset on, the 5-hour wall first checks and claims the weekly reset of the session
// limit: after a reset the request runs again at full speed; a reset already used is remembered
// and the lane takes over; a failed reset backs off and the lane takes over.
func TestLimitReset(t *testing.T) {
	t.Run("reset", func(t *testing.T) {
		l := newLaneEnv(t, false, true)
		l.script.push(l.wall(""))
		if st, body := l.post(); st != 200 {
			t.Fatalf("%d %s", st, body)
		}
		if got := l.script.sent(); len(got) != 2 || got[1] || l.f.ResetClaims.Load() != 1 {
			t.Fatalf("calls %v, claims %d", got, l.f.ResetClaims.Load())
		}
		lane := l.lane()
		if lane["reset_result"] != "reset" || lane["reset_next_available"] == nil || l.State(l.id).Status != "active" {
			t.Fatalf("lane %v", lane)
		}
		// Once a week: the next wall does not claim again.
		l.script.push(l.wall(""))
		if st, _ := l.post(); st != 429 || l.f.ResetClaims.Load() != 1 {
			t.Fatal("claimed again within the week")
		}
	})
	t.Run("already used, then the lane", func(t *testing.T) {
		l := laneAfterReset(t, "already_used")
		if got := l.script.sent(); len(got) != 2 || !got[1] || l.f.ResetClaims.Load() != 0 {
			t.Fatalf("calls %v, claims %d", got, l.f.ResetClaims.Load())
		}
		lane := l.lane()
		if lane["reset_result"] != "already_used" || !strings.HasPrefix(fmt.Sprint(lane["reset_next_available"]), "2099-01-01") || lane["state"] != "accepted" {
			t.Fatalf("lane %v", lane)
		}
	})
	t.Run("error, then the lane", func(t *testing.T) {
		l := laneAfterReset(t, "error")
		if lane := l.lane(); lane["reset_result"] != "error" || lane["state"] != "accepted" {
			t.Fatalf("lane %v", lane)
		}
		if l.f.ResetChecks.Load() != 1 {
			t.Fatalf("reset checks %d", l.f.ResetChecks.Load())
		}
		// During the 15 min back-off no reset is tried; the lane takes the wall at once.
		l.script.push(l.slow(429, "weekly_limit"))
		l.post()
		l.Clock.Advance(time.Minute)
		l.script.push(l.wall("treatment"), l.slow(200, "active"))
		if st, _ := l.post(); st != 200 || l.f.ResetChecks.Load() != 1 {
			t.Fatalf("status %d, reset checks %d", st, l.f.ResetChecks.Load())
		}
		l.script.push(l.slow(429, "weekly_limit"))
		l.post()
		l.Clock.Advance(15 * time.Minute)
		l.f.Reset.Store("reset")
		l.script.push(l.wall("treatment"))
		if st, _ := l.post(); st != 200 || l.f.ResetChecks.Load() != 2 || l.f.ResetClaims.Load() != 1 {
			t.Fatalf("after the back-off: status %d, checks %d, claims %d", st, l.f.ResetChecks.Load(), l.f.ResetClaims.Load())
		}
	})
}

// The lane state survives a restart.
func TestLaneStatePersists(t *testing.T) {
	l := newLaneEnv(t, true, false)
	l.script.push(l.wall("treatment"), l.slow(200, "active"))
	l.post()
	l.Restart()
	if lane := l.lane(); lane["state"] != "accepted" {
		t.Fatalf("after restart %v", lane)
	}
	if st, _ := l.post(); st != 200 || !l.script.sent()[2] {
		t.Fatal("the restored lane does not send the slow header")
	}
}

// Every call a Claude account's loop makes is a step of the attempt chain, and the request log
// counts the chain: the wall's 429 the lane takes on, then the slow call that serves; a 401 that a
// refreshed token answers, then the call with it.
func TestClaudeAccountCallsAreInTheChain(t *testing.T) {
	l := newLaneEnv(t, true, false)
	type step struct {
		kind   string
		status int
		reason string
	}
	chain := func() []step {
		t.Helper()
		d := requestDetail(t, l.Env, requestLog(t, l.Env, "?surface=/v1/messages&limit=1")[0].ID)
		checkCounts(t, d)
		var out []step
		for _, a := range d.Attempts {
			out = append(out, step{a.Kind, a.Status, a.Reason})
		}
		return out
	}
	l.script.push(l.wall("treatment"), l.slow(200, "active"))
	if st, body := l.post(); st != 200 {
		t.Fatalf("%d %s", st, body)
	}
	if got := chain(); fmt.Sprint(got) != fmt.Sprint([]step{{"first", 429, "lane_accepted"}, {"retry", 200, ""}}) {
		t.Fatalf("lane chain %v", got)
	}
	l.f.RevokeAll()
	if st, body := l.post(); st != 200 {
		t.Fatalf("%d %s", st, body)
	}
	if got := chain(); fmt.Sprint(got) != fmt.Sprint([]step{{"first", 401, "token_rejected"}, {"retry", 200, ""}}) {
		t.Fatalf("refresh chain %v", got)
	}
}
