package proxy

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"switchyard/services/catalog"
	"switchyard/services/resilience"
)

// The session key: X-Switchyard-Session, then X-Session-Id, then Claude Code's header, then the
// session id in metadata.user_id of a messages body; longer than 256 bytes → hashed.
func TestSessionOf(t *testing.T) {
	long := strings.Repeat("s", 300)
	tests := []struct {
		name   string
		header map[string]string
		body   string
		src    Format
		want   string
	}{
		{"none", nil, `{"model":"m"}`, FormatChat, ""},
		{"switchyard header first", map[string]string{"X-Switchyard-Session": "sy", "X-Session-Id": "sid", "X-Claude-Code-Session-Id": "cc"}, `{}`, FormatChat, "sy"},
		{"then X-Session-Id", map[string]string{"X-Session-Id": "sid", "X-Claude-Code-Session-Id": "cc"}, `{}`, FormatChat, "sid"},
		{"then Claude Code's header", map[string]string{"X-Claude-Code-Session-Id": "cc"}, `{}`, FormatMessages, "cc"},
		{"blank headers do not count", map[string]string{"X-Switchyard-Session": "  ", "X-Session-Id": "sid"}, `{}`, FormatChat, "sid"},
		{"then metadata.user_id", nil, `{"metadata":{"user_id":"{\"session_id\":\"cc-body\"}"}}`, FormatMessages, "cc-body"},
		{"older user id", nil, `{"metadata":{"user_id":"user_x_account__session_abc"}}`, FormatMessages, "abc"},
		{"metadata only on messages", nil, `{"metadata":{"user_id":"{\"session_id\":\"cc-body\"}"}}`, FormatChat, ""},
		{"long keys are hashed", map[string]string{"X-Session-Id": long}, `{}`, FormatChat, resilience.SessionKey(long)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.header {
				h.Set(k, v)
			}
			got := sessionOf(h, []byte(tc.body), tc.src)
			if got != tc.want {
				t.Fatalf("session %q, want %q", got, tc.want)
			}
			if len(got) > resilience.MaxSessionKey {
				t.Fatalf("a key of %d bytes", len(got))
			}
		})
	}
}

// The session headers never reach an upstream through the header whitelist.
func TestUpstreamHeaderDropsSessions(t *testing.T) {
	in := http.Header{"X-Switchyard-Session": {"a"}, "X-Session-Id": {"b"}, "X-Claude-Code-Session-Id": {"c"}, "User-Agent": {"sdk"}}
	for _, src := range []Format{FormatChat, FormatMessages, FormatResponses} {
		for _, dst := range []Format{FormatChat, FormatMessages, FormatResponses} {
			h := upstreamHeader(in, src, dst)
			for _, k := range []string{"X-Switchyard-Session", "X-Session-Id", "X-Claude-Code-Session-Id"} {
				if h.Get(k) != "" {
					t.Fatalf("%d→%d forwards %s", src, dst, k)
				}
			}
		}
	}
}

// The pinned connection goes first; the rest keep their order; without a pin (or with affinity
// off) the order is the provider's.
func TestPinFirst(t *testing.T) {
	clk := clockwork.NewFakeClock()
	pins := resilience.NewPins(clk, 0, nil)
	pins.SetTTL(time.Hour)
	e := New(Options{Clock: clk, Pins: pins})
	conns := []*catalog.ConnEntry{{ID: 1}, {ID: 2}, {ID: 3}}
	ids := func(cs []*catalog.ConnEntry) (out []int64) {
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}
	c := &call{t: target{provider: &catalog.ProviderEntry{Name: "p"}}}
	c.session = e.sessionFor(http.Header{"X-Session-Id": {"s"}}, nil, FormatChat, 7)
	if got := ids(e.pinFirst(c, conns)); len(got) != 3 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("without a pin: %v", got)
	}
	pins.UseConnection(c.session.id, "p", 3)
	if got := ids(e.pinFirst(c, conns)); got[0] != 3 || got[1] != 1 || got[2] != 2 || c.session.pin.conn != 3 {
		t.Fatalf("pinned to 3: %v", got)
	}
	if ids(conns)[0] != 1 {
		t.Fatal("the provider's own slice was reordered")
	}
	// Another client key naming the same session has no pin.
	other := &call{t: c.t, session: e.sessionFor(http.Header{"X-Session-Id": {"s"}}, nil, FormatChat, 8)}
	if got := ids(e.pinFirst(other, conns)); got[0] != 1 {
		t.Fatalf("another client's session follows the pin: %v", got)
	}
	// Pinned to a connection no longer a candidate: the order stays, and whoever serves is pinned.
	pins.UseConnection(c.session.id, "p", 9)
	if got := ids(e.pinFirst(c, conns)); got[0] != 1 || !c.session.pin.out {
		t.Fatalf("pinned to a gone connection: %v", got)
	}
	// Affinity off: no session at all.
	pins.SetTTL(0)
	if s := e.sessionFor(http.Header{"X-Session-Id": {"s"}}, nil, FormatChat, 7); s.ok {
		t.Fatal("a session while affinity is off")
	}
}
