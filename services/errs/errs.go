// Package errs is the small set of error codes services return and handlers map to statuses.
package errs

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Code says what kind of failure an error is, independent of transport.
type Code string

// The codes every service uses.
const (
	Invalid      Code = "invalid"
	NotFound     Code = "not_found"
	Conflict     Code = "conflict"
	Unauthorized Code = "unauthorized"
	Forbidden    Code = "forbidden"
	Internal     Code = "internal"
)

// Error carries a code, a message fit for users, and optional per-field messages.
type Error struct {
	Code    Code
	Message string
	Fields  map[string]string
	Err     error // wrapped cause, for logs only
}

func (e *Error) Error() string {
	msg := e.Message
	if len(e.Fields) > 0 {
		keys := make([]string, 0, len(e.Fields))
		for k := range e.Fields {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + ": " + e.Fields[k]
		}
		msg += " (" + strings.Join(parts, "; ") + ")"
	}
	if e.Err != nil {
		return msg + ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// E builds an error with a code and a formatted message.
func E(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Fields builds an Invalid error with per-field messages.
func Fields(fields map[string]string) *Error {
	return &Error{Code: Invalid, Message: "validation failed", Fields: fields}
}

// CodeOf returns the code of err, Internal for anything unknown.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}
