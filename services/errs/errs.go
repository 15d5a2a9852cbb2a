// Package errs is the one error type of the gateway. A service returns an *Error carrying a
// stable code (what kind of failure), a message as a catalog key with its arguments (what a user
// reads, in their language) and per-field messages for validation; the edge renders it once, in
// the caller's format and language, and logs it once. The package knows no catalog: a message is
// data, and the words come from the edge.
package errs

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Code says what kind of failure an error is, independent of transport. Each code has a default
// HTTP status (StatusOf); an error may name another status explicitly.
type Code string

// The codes every service uses.
const (
	Invalid      Code = "invalid"       // 422 on the admin API, 400 on the proxy surfaces
	NotFound     Code = "not_found"     // 404
	Conflict     Code = "conflict"      // 409
	Unauthorized Code = "unauthorized"  // 401
	Forbidden    Code = "forbidden"     // 403
	TooLarge     Code = "too_large"     // 413
	RateLimited  Code = "rate_limited"  // 429: a limit of ours or of every upstream connection
	Unavailable  Code = "unavailable"   // 503: a provider outage, an open breaker
	Upstream     Code = "upstream"      // 502: an upstream answered badly or not at all
	Timeout      Code = "timeout"       // 504
	ClientClosed Code = "client_closed" // 499: the caller went away; nobody to answer
	Internal     Code = "internal"      // 500: details go to the log, never to the caller
)

// Msg is a user-visible text as data: a catalog key and the arguments of its format. The edge
// renders it in the reader's language (handlers.Text for the dashboard).
type Msg struct {
	Key  string
	Args []any
}

// M builds a message.
func M(key string, args ...any) Msg { return Msg{Key: key, Args: args} }

// Renderer writes a catalog key with the arguments of its format as text in one language.
type Renderer func(key string, args ...any) string

// english renders String and Error; nil until the composition root installs one.
//
// It is one process-wide setting rather than a renderer injected into each service, or keys and
// arguments logged as structured fields, because Error is the one text every holder of an error
// gets and none of them can be handed a language: slog attributes, %w chains, the causes kept
// beside a message, and the English diagnostics the services keep where operators read them
// later (a connection's last error in the state store, an OAuth account's last error, a
// provider's recent failures) or send by contract (the proxy surfaces' error bodies). Logging
// keys instead would make those texts unreadable. The domain still imports no catalog: app
// installs the English catalog as a plain function at start and nothing changes it afterwards;
// text in the reader's language is rendered at the edge from the key and arguments, never from
// String.
var english atomic.Pointer[Renderer]

// SetRenderer installs the English renderer behind String and Error (nil removes it). The
// composition root calls it at start, before any service runs; calling it again with the same
// catalog (one app per end-to-end test in one process) changes nothing.
func SetRenderer(r Renderer) {
	if r == nil {
		english.Store(nil)
		return
	}
	english.Store(&r)
}

// String is the message in English (logs, stored diagnostics, the proxy surfaces), rendered by
// the installed renderer. Without one (unit tests of a service) it is the data itself, the key
// with its arguments in Go syntax (err.combo_targets(16), proxy.unreachable("p",
// proxy.transport_op("dial", "refused"))), so that a test asserts on data, not on wording.
func (m Msg) String() string {
	if r := english.Load(); r != nil {
		return (*r)(m.Key, m.Args...)
	}
	return m.raw()
}

// raw writes the key with its arguments: strings and errors quoted, nested messages likewise.
func (m Msg) raw() string {
	if len(m.Args) == 0 {
		return m.Key
	}
	var b strings.Builder
	b.WriteString(m.Key)
	b.WriteByte('(')
	for i, a := range m.Args {
		if i > 0 {
			b.WriteString(", ")
		}
		switch v := a.(type) {
		case Msg:
			b.WriteString(v.raw())
		case string:
			b.WriteString(strconv.Quote(v))
		case error:
			b.WriteString(strconv.Quote(v.Error()))
		default:
			fmt.Fprint(&b, v)
		}
	}
	b.WriteByte(')')
	return b.String()
}

// Error carries a code, a message, optional per-field messages and, on the proxy surfaces, what
// the client needs to decide whether and when to come back.
type Error struct {
	Code Code
	Msg  Msg
	// Fields holds per-field messages keyed by field name or dotted path.
	Fields map[string]Msg
	// Err is the wrapped cause, for logs only.
	Err error

	// Status overrides the code's default HTTP status (e.g. an upstream's own status relayed).
	Status int
	// Reason is the stable machine-readable reason shown to API clients as "code"
	// (model_not_found, circuit_open, …); empty means the Code itself.
	Reason string
	// RetryAfter is sent as Retry-After when > 0.
	RetryAfter time.Duration
	// Header carries extra response headers (x-should-retry).
	Header http.Header
	// Diagnostics is shown beside the error on the proxy surfaces (why connections were excluded).
	Diagnostics any
}

// Error is the English message with its fields and cause, for logs (see String).
func (e *Error) Error() string { return e.Render(Msg.String) }

// Render is the message with its fields (sorted, "field: message") and cause, each message
// written by text: the edge passes its own English renderer for the request log.
func (e *Error) Render(text func(Msg) string) string {
	msg := text(e.Msg)
	if len(e.Fields) > 0 {
		parts := make([]string, 0, len(e.Fields))
		for _, k := range slices.Sorted(maps.Keys(e.Fields)) {
			if k == "" {
				parts = append(parts, text(e.Fields[k]))
				continue
			}
			parts = append(parts, k+": "+text(e.Fields[k]))
		}
		msg += " (" + strings.Join(parts, "; ") + ")"
	}
	if e.Err != nil {
		return msg + ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// HTTPStatus is the status the error is answered with.
func (e *Error) HTTPStatus() int {
	if e.Status != 0 {
		return e.Status
	}
	return StatusOf(e.Code)
}

// ReasonCode is the machine-readable reason: Reason, else the code.
func (e *Error) ReasonCode() string {
	if e.Reason != "" {
		return e.Reason
	}
	return string(e.Code)
}

// New builds an error with a code and a message key.
func New(code Code, key string, args ...any) *Error {
	return &Error{Code: code, Msg: M(key, args...)}
}

// Wrap builds an error with a code and a message around a cause (kept for the log).
func Wrap(err error, code Code, key string, args ...any) *Error {
	return &Error{Code: code, Msg: M(key, args...), Err: err}
}

// Fields builds an Invalid error with per-field messages.
func Fields(fields map[string]Msg) *Error {
	return &Error{Code: Invalid, Msg: M("err.validation"), Fields: fields}
}

// Field builds an Invalid error for one field.
func Field(name, key string, args ...any) *Error {
	return Fields(map[string]Msg{name: M(key, args...)})
}

// Internalf builds an internal error from a formatted cause; users read only "internal error".
func Internalf(format string, args ...any) *Error {
	return &Error{Code: Internal, Msg: M("err.internal"), Err: fmt.Errorf(format, args...)}
}

// As returns err as an *Error: itself when it is one, else an internal error wrapping it.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: Internal, Msg: M("err.internal"), Err: err}
}

// CodeOf returns the code of err, Internal for anything unknown.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// StatusOf is a code's default HTTP status.
func StatusOf(c Code) int {
	switch c {
	case Invalid:
		return http.StatusUnprocessableEntity
	case NotFound:
		return http.StatusNotFound
	case Conflict:
		return http.StatusConflict
	case Unauthorized:
		return http.StatusUnauthorized
	case Forbidden:
		return http.StatusForbidden
	case TooLarge:
		return http.StatusRequestEntityTooLarge
	case RateLimited:
		return http.StatusTooManyRequests
	case Unavailable:
		return http.StatusServiceUnavailable
	case Upstream:
		return http.StatusBadGateway
	case Timeout:
		return http.StatusGatewayTimeout
	case ClientClosed:
		return 499
	}
	return http.StatusInternalServerError
}

// CodeForStatus is the code that describes an HTTP status (an upstream's answer).
func CodeForStatus(status int) Code {
	switch {
	case status == http.StatusBadRequest || status == http.StatusUnprocessableEntity:
		return Invalid
	case status == http.StatusUnauthorized:
		return Unauthorized
	case status == http.StatusForbidden || status == http.StatusPaymentRequired:
		return Forbidden
	case status == http.StatusNotFound:
		return NotFound
	case status == http.StatusConflict:
		return Conflict
	case status == http.StatusRequestEntityTooLarge:
		return TooLarge
	case status == http.StatusTooManyRequests:
		return RateLimited
	case status == http.StatusServiceUnavailable || status == 529:
		return Unavailable
	case status == http.StatusGatewayTimeout || status == http.StatusRequestTimeout:
		return Timeout
	case status == 499:
		return ClientClosed
	case status >= 500:
		return Upstream
	case status >= 400:
		return Invalid
	}
	return Internal
}
