package proxy

import (
	"net/http"
	"time"
)

// Error is a failure the engine answers before any byte of a response reached the client. The
// handler renders it in the client's own format.
type Error struct {
	Status     int
	Type       string // OpenAI-style error type, e.g. invalid_request_error
	Code       string // stable machine code, e.g. model_not_found
	Message    string
	RetryAfter time.Duration // sent as Retry-After when > 0
	// Raw, when set, is an upstream error body already in OpenAI format, relayed as is.
	Raw []byte
	// Header carries extra response headers (e.g. x-should-retry).
	Header http.Header
	// Excluded explains, when no connection could take the request, why each was left out.
	Excluded []Excluded
}

// Excluded is one connection left out of a request, for the error's diagnostics.
type Excluded struct {
	Connection  string `json:"connection"`
	Reason      string `json:"reason"` // connection_cooldown, model_lockout, terminal
	Detail      string `json:"detail,omitempty"`
	Target      string `json:"target,omitempty"`
	SecondsLeft int64  `json:"seconds_left"`
}

func (e *Error) Error() string { return e.Message }

func errInvalid(code, msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: code, Message: msg}
}

func errModelNotFound(model string) *Error {
	return &Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "model_not_found",
		Message: "The model `" + model + "` does not exist or is not served by any configured provider. " +
			"Address models as provider/model (see GET /v1/models)."}
}
