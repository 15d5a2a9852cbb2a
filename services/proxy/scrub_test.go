package proxy

import (
	"bufio"
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/services/catalog"
	"switchyard/services/redact"
	"switchyard/services/resilience"
	"switchyard/services/settings"
)

// fakeAccounts holds one account whose tokens were rotated since the registry was built.
type fakeAccounts struct{ live []string }

func (f fakeAccounts) Token(context.Context, *catalog.ConnEntry) (string, error) {
	return f.live[0], nil
}
func (f fakeAccounts) Secrets(int64) []string { return f.live }
func (f fakeAccounts) TokenRejected(context.Context, *catalog.ConnEntry, string) (string, error) {
	return f.live[0], nil
}
func (fakeAccounts) PollSoon(int64) {}
func (fakeAccounts) LimitReset(context.Context, *catalog.ConnEntry) resilience.ResetOutcome {
	return resilience.ResetOutcome{}
}

type fakeOAuthSettings struct{}

func (fakeOAuthSettings) Snapshot() *settings.OAuthSnapshot { return nil }

// An OAuth connection's upstream text is scrubbed of the token the attempt carried and of the
// account's live access and refresh tokens, not only of the registry's copy.
func TestScrubRemovesLiveOAuthTokens(t *testing.T) {
	e := New(Options{Accounts: fakeAccounts{live: []string{"live.access.0123", "live.refresh.4567"}}, OAuthSettings: fakeOAuthSettings{}})
	conn := &catalog.ConnEntry{ID: 7, AuthType: catalog.AuthOAuth, APIKey: "stored.access.89ab",
		OAuth: &catalog.OAuthCredential{AccessToken: "stored.access.89ab", RefreshToken: "stored.refresh.cdef"}}
	c := &call{claude: claudeCall{token: "carried.token.3210"}}
	in := "tokens: live.access.0123 live.refresh.4567 stored.access.89ab stored.refresh.cdef carried.token.3210 sk-ant-oat01-AAAABBBBCCCC"
	got := e.scrub(in, c, conn)
	if got != "tokens: [redacted] [redacted] [redacted] [redacted] [redacted] [redacted]" {
		t.Fatalf("scrubbed: %q", got)
	}
	api := &catalog.ConnEntry{ID: 8, AuthType: catalog.AuthAPIKey, APIKey: "plain.key.value"}
	if got := string(e.scrubBytes([]byte("bad plain.key.value"), c, api)); got != "bad [redacted]" {
		t.Fatalf("api key connection: %q", got)
	}
}

// Error events in the middle of a stream are scrubbed before they reach the client; deltas are
// relayed as they came and never reach the scrubber.
func TestRelayScrubsMidStreamErrors(t *testing.T) {
	const secret = "sk-live-SECRET-0123456789"
	first := []byte(`data: {"choices":[{"delta":{"content":"Hi"}}]}` + "\n\n")
	rest := `data: {"choices":[{"delta":{"content":" there, no error here"}}]}` + "\n\n" +
		`data: {"error":{"message":"Invalid request with key ` + secret + `","type":"invalid_request_error"}}` + "\n\n" +
		"event: error\ndata: {\"message\":\"again " + secret + "\"}\n\n" +
		"data: [DONE]\n\n"
	var cleaned []string
	clean := func(ev []byte) []byte {
		cleaned = append(cleaned, string(ev))
		return redact.Bytes(ev, secret)
	}
	w := httptest.NewRecorder()
	res := &attemptResult{held: [][]byte{first}, br: bufio.NewReader(strings.NewReader(rest)), wd: startWatchdog(clockwork.NewFakeClock(), FormatChat, watchConfig{readiness: time.Minute, idle: time.Minute}, func() {})}
	end := relayStream(context.Background(), w, func() {}, res, slog.New(slog.DiscardHandler),
		&passthrough{format: FormatChat}, FormatChat, clean, func() {})
	out := w.Body.String()
	// The stream reached its end; its end is the upstream's error, as the client saw it.
	if end != endUpstreamErr || strings.Contains(out, secret) || strings.Count(out, "[redacted]") != 2 || !strings.Contains(out, "no error here") {
		t.Fatalf("end %q, client got:\n%s", end, out)
	}
	if len(cleaned) != 2 {
		t.Fatalf("%d events went through the scrubber, want the 2 error events: %q", len(cleaned), cleaned)
	}
}

func TestDuplicateKey(t *testing.T) {
	for body, want := range map[string]string{
		`{"model":"a","model":"b"}`:                              "model",
		`{"stream":false,"x":{"stream":1},"stream":true}`:        "stream",
		`{"model":"a","messages":[{"model":"x"},{"model":"y"}]}`: "",
		`{"a":1,"b":2}`: "",
	} {
		if got := duplicateKey([]byte(body)); got != want {
			t.Errorf("duplicateKey(%s) = %q, want %q", body, got, want)
		}
	}
	if _, err := DecodeRequest([]byte(`{"model":"sim/sim-small","model":"other-model"}`)); err == nil || err.ReasonCode() != "duplicate_key" {
		t.Fatalf("a duplicated model was accepted: %v", err)
	}
	if !strings.Contains(errInvalid("x", "proxy.duplicate_key", "model").Error(), "model") {
		t.Fatal("the message does not name the field")
	}
}
