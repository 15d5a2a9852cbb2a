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
