package proxy

import (
	"time"

	"switchyard/services/errs"
)

// The engine's failures are *errs.Error: Code says whose problem it is (and so the HTTP
// status), Reason is the stable machine code clients see (model_not_found, circuit_open, …),
// Msg the English text from the catalog. A failure is returned only while nothing has been
// written to the client; the edge renders it in the client's format.

// Excluded is one connection left out of a request, for the error's diagnostics.
type Excluded struct {
	Connection  string `json:"connection"`
	Reason      string `json:"reason"` // connection_cooldown, model_lockout, terminal
	Detail      string `json:"detail,omitempty"`
	Target      string `json:"target,omitempty"`
	SecondsLeft int64  `json:"seconds_left"`
}

// Diagnostics is shown beside an error: how many upstream calls the request made, why
// connections were left out, and for a combo its decision trace.
type Diagnostics struct {
	Attempts int        `json:"attempts"`
	Excluded []Excluded `json:"excluded,omitempty"`
	// Route is the combo's route as the request log keeps it: every target considered, each
	// skip with its reason, source and until, each call with its outcome. It names targets,
	// connections and reasons only: no credential or lease header reaches it.
	Route []RouteStep `json:"route,omitempty"`
}

// fail builds an engine error. It is never inlined: inlined, each call site's error value and
// arguments took room in the caller's stack frame, and the engine's loop (run, work) stays on the
// stack of every open stream, where frame sizes add up to the stack each stream keeps.
//
//go:noinline
func fail(code errs.Code, reason, key string, args ...any) *errs.Error {
	return &errs.Error{Code: code, Reason: reason, Msg: errs.M(key, args...)}
}

// withRetry sets the error's Retry-After.
func withRetry(e *errs.Error, d time.Duration) *errs.Error {
	e.RetryAfter = d
	return e
}

// errInvalid is a bad client request (400 on the proxy surfaces).
func errInvalid(reason, key string, args ...any) *errs.Error {
	e := fail(errs.Invalid, reason, key, args...)
	e.Status = 400
	return e
}

func errModelNotFound(model string) *errs.Error {
	return fail(errs.NotFound, "model_not_found", "proxy.model_not_found", model)
}

func clientGone() *errs.Error {
	return fail(errs.ClientClosed, "client_closed", "proxy.client_closed")
}

// isClientGone reports whether the error only says the client left.
func isClientGone(e *errs.Error) bool { return e != nil && e.Code == errs.ClientClosed }
