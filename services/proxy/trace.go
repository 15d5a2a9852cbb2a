package proxy

import (
	"strconv"
	"time"
	"unsafe"

	"switchyard/services/catalog"
	"switchyard/services/spend"
	"switchyard/services/traffic"
)

// Trace collects what happened to one request, for the request log and metrics. The handler
// owns it; the engine fills it in.
type Trace struct {
	// ClientKeyID is the client key that made the request.
	ClientKeyID int64
	// Access is what that key may address (clientkeys.Access); nil allows every model.
	Access KeyAccess
	// ErrorCode is the reason code of the error answered, "" when none.
	ErrorCode string
	Provider  string
	Model     string
	// MetricModel is Model when the provider's inventory lists it, else UnlistedModel: the label
	// metrics use, so made-up model names cannot grow the series without bound.
	MetricModel  string
	ConnectionID int64
	// Attempts, Retries and Failovers count the Chain: every upstream call, the calls of kind
	// retry and those of kind failover (see Trace.attempt).
	Attempts  int
	Retries   int
	Failovers int
	Status    int // status of the answer relayed, 0 if none
	Stream    bool
	Complete  bool // a stream ended with its terminal event
	// StreamEnd is why a stream did not end complete ("" when it did, or for an answer): its
	// upstream broke it, ended it with an error, a watchdog aborted it, the client went away.
	StreamEnd    string
	TTFT         time.Duration // to the first relayed event (streams)
	InputTokens  int64
	OutputTokens int64
	// Usage is every count of the answer's usage (InputTokens and OutputTokens are its Input
	// and Output); CostUSD what it cost when Priced (a price was known, or the connection is a
	// subscription account, whose requests cost 0).
	Usage   spend.Usage
	CostUSD float64
	Priced  bool
	// Chain is every upstream attempt, in order.
	Chain []Attempt
	// Skipped names the connections left out (cooling, terminal, model locked out) and why, the
	// latest word on each.
	Skipped []Excluded
	// Combo is the combo the client named ("" for a plain request); Route is its decision
	// trace: every target considered, in the order considered, with what became of it.
	Combo string
	Route []RouteStep
	// Dropped names the request's fields and tools the upstream's format could not carry
	// (translated requests only).
	Dropped []string
	// target names the combo target being tried, for the attempts it makes.
	target string
}

// RouteStep is one target a combo considered for a request: the request log keeps the route as
// the engine wrote it.
type RouteStep = traffic.RouteStep

// RouteHeader is the response header that tells the client which target answered and how many
// upstream calls the request made.
const RouteHeader = "X-Switchyard-Route"

// route is the RouteHeader value: the combo (when one was named), the target (provider/model)
// tried last, and the attempts made.
func (t *Trace) route() string {
	// Sized up front: one allocation per answer.
	b := make([]byte, 0, len(t.Combo)+len(t.Provider)+len(t.Model)+32)
	if t.Combo != "" {
		b = append(b, "combo="...)
		b = append(b, t.Combo...)
		b = append(b, "; "...)
	}
	if t.Provider != "" {
		b = append(b, "target="...)
		b = append(b, t.Provider...)
		b = append(b, '/')
		b = append(b, t.Model...)
		b = append(b, "; "...)
	}
	b = append(b, "attempts="...)
	b = strconv.AppendInt(b, int64(t.Attempts), 10)
	return unsafe.String(unsafe.SliceData(b), len(b)) // b is not used again
}

// Attempt is one upstream call of a request.
type Attempt struct {
	ConnectionID int64         `json:"connection_id"`
	Connection   string        `json:"connection"`
	Kind         string        `json:"kind"`   // first, retry or failover
	Status       int           `json:"status"` // the upstream's status; 0 when no answer came
	Reason       string        `json:"reason,omitempty"`
	Duration     time.Duration `json:"duration"`
	// Detail says more where the reason needs it: a redirect's target (scrubbed).
	Detail string `json:"detail,omitempty"`
	// Target is the combo target the attempt was made for ("" for a plain request).
	Target string `json:"target,omitempty"`

	began time.Time
	ended bool
}

// attempt notes an upstream call on conn, begun at now, as the chain's next step and counts it.
// kind is first, retry (the request sent again: a new round after a backoff wait, or once more on
// the same Claude account after a refreshed token, a limit reset or in its lane) or failover
// (moved to another connection after a failure). Every call goes through here, so the counts are
// the chain's on every path.
func (t *Trace) attempt(conn *catalog.ConnEntry, kind string, now time.Time) {
	t.Chain = append(t.Chain, Attempt{ConnectionID: conn.ID, Connection: conn.Name, Kind: kind, Target: t.target, began: now})
	t.ConnectionID = conn.ID
	t.Attempts++
	switch kind {
	case "retry":
		t.Retries++
	case "failover":
		t.Failovers++
	}
}

// step is the call in progress: the chain's last step.
func (t *Trace) step() *Attempt { return &t.Chain[len(t.Chain)-1] }

// end notes the step's answer (status 0: none) when the call ended at now; a step ended before
// keeps its answer.
func (a *Attempt) end(status int, now time.Time) {
	if a.ended {
		return
	}
	a.Status, a.Duration, a.ended = status, now.Sub(a.began), true
}

// skip notes why connections were left out, keeping one entry per connection.
func (t *Trace) skip(ex []Excluded) {
next:
	for _, x := range ex {
		for i := range t.Skipped {
			if t.Skipped[i].Connection == x.Connection {
				t.Skipped[i] = x
				continue next
			}
		}
		t.Skipped = append(t.Skipped, x)
	}
}

// UnlistedModel is the metric label of models the provider's inventory does not list.
const UnlistedModel = "unlisted"

// Observer receives engine events for metrics; the consumer (main) wires it to Prometheus.
type Observer interface {
	Attempt(provider, outcome, kind string)
	ConnectionFailure(provider, reason string)
	FirstToken(provider string, d time.Duration)
	Tokens(provider, model string, input, output int64)
	QueueRejected(provider, connection, code string)
	FailOpen(provider, connection string)
	// StreamEnd counts a stream that did not end complete, by why (stream.go's ends and the
	// watchdogs' abort kinds); early is set when it ended before the client saw anything of it
	// (the request went on to another attempt).
	StreamEnd(provider, end string, early bool)
	// Dropped counts a request field or tool the upstream's format could not carry.
	Dropped(provider, field string)
}

type nopObserver struct{}

func (nopObserver) Attempt(string, string, string)       {}
func (nopObserver) ConnectionFailure(string, string)     {}
func (nopObserver) FirstToken(string, time.Duration)     {}
func (nopObserver) Tokens(string, string, int64, int64)  {}
func (nopObserver) QueueRejected(string, string, string) {}
func (nopObserver) FailOpen(string, string)              {}
func (nopObserver) StreamEnd(string, string, bool)       {}
func (nopObserver) Dropped(string, string)               {}
