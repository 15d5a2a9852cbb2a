package proxy

import (
	"encoding/json"
	"net/http"
	"strconv"

	"switchyard/services/errs"
)

// reasonInsufficientQuota is the reason of the answer when every connection is out of credits:
// OpenAI's own code and type for an account without quota, Anthropic's billing_error.
const reasonInsufficientQuota = "insufficient_quota"

// OpenAIType is an error's "type" in the OpenAI format.
func OpenAIType(e *errs.Error) string {
	return wireType(e, reasonInsufficientQuota, openAITypes, "server_error")
}

// AnthropicType is an error's "error.type" in the Anthropic format.
func AnthropicType(e *errs.Error) string {
	return wireType(e, "billing_error", anthropicTypes, "api_error")
}

// openAITypes and anthropicTypes name each code's error type in the two formats.
var (
	openAITypes = map[errs.Code]string{
		errs.Invalid: "invalid_request_error", errs.TooLarge: "invalid_request_error",
		errs.NotFound: "invalid_request_error", errs.Conflict: "invalid_request_error",
		errs.Unauthorized: "authentication_error", errs.Forbidden: "permission_error",
		errs.RateLimited: "rate_limit_error", errs.Upstream: "upstream_error", errs.Timeout: "timeout_error",
	}
	anthropicTypes = map[errs.Code]string{
		errs.Invalid: "invalid_request_error", errs.Conflict: "invalid_request_error",
		errs.TooLarge: "request_too_large", errs.NotFound: "not_found_error",
		errs.Unauthorized: "authentication_error", errs.Forbidden: "permission_error",
		errs.RateLimited: "rate_limit_error", errs.Unavailable: "overloaded_error", errs.Timeout: "timeout_error",
	}
)

// wireType is the type of e in a format: quota (its type for an account out of credits), else
// the code's entry of types, else other.
func wireType(e *errs.Error, quota string, types map[errs.Code]string, other string) string {
	if e.Reason == reasonInsufficientQuota {
		return quota
	}
	if t, ok := types[e.Code]; ok {
		return t
	}
	return other
}

type openAIError struct {
	Error       openAIErrorBody `json:"error"`
	Diagnostics any             `json:"diagnostics,omitempty"`
}

type openAIErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Code    string  `json:"code"`
	Param   *string `json:"param"`
}

// OpenAIErrorBody is the error in the OpenAI format, with the diagnostics beside it.
func OpenAIErrorBody(e *errs.Error) []byte {
	b, _ := json.Marshal(openAIError{Error: openAIErrorBody{Message: e.Msg.String(), Type: OpenAIType(e), Code: e.ReasonCode()},
		Diagnostics: e.Diagnostics})
	return b
}

type anthropicError struct {
	Type        string             `json:"type"`
	Error       anthropicErrorBody `json:"error"`
	Diagnostics any                `json:"diagnostics,omitempty"`
}

type anthropicErrorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// AnthropicErrorBody is the error in the Anthropic format, with the diagnostics beside it.
func AnthropicErrorBody(e *errs.Error) []byte {
	b, _ := json.Marshal(anthropicError{Type: "error", Error: anthropicErrorBody{Type: AnthropicType(e), Message: e.Msg.String()},
		Diagnostics: e.Diagnostics})
	return b
}

// ErrorHeaders sets the headers every error answer of the proxy surfaces carries: the error's
// own, and Retry-After on 429 and 503 (the error's, else 1 s).
func ErrorHeaders(h http.Header, e *errs.Error) {
	for k, v := range e.Header {
		h[k] = v
	}
	status := e.HTTPStatus()
	if e.RetryAfter > 0 {
		secs := int64((e.RetryAfter + 999_999_999) / 1_000_000_000)
		h.Set("Retry-After", strconv.FormatInt(secs, 10))
	} else if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		h.Set("Retry-After", "1")
	}
}
