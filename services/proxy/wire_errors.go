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
	if e.Reason == reasonInsufficientQuota {
		return reasonInsufficientQuota
	}
	switch e.Code {
	case errs.Invalid, errs.TooLarge, errs.NotFound, errs.Conflict:
		return "invalid_request_error"
	case errs.Unauthorized:
		return "authentication_error"
	case errs.Forbidden:
		return "permission_error"
	case errs.RateLimited:
		return "rate_limit_error"
	case errs.Upstream:
		return "upstream_error"
	case errs.Timeout:
		return "timeout_error"
	}
	return "server_error"
}

// AnthropicType is an error's "error.type" in the Anthropic format.
func AnthropicType(e *errs.Error) string {
	if e.Reason == reasonInsufficientQuota {
		return "billing_error"
	}
	switch e.Code {
	case errs.Invalid, errs.Conflict:
		return "invalid_request_error"
	case errs.TooLarge:
		return "request_too_large"
	case errs.NotFound:
		return "not_found_error"
	case errs.Unauthorized:
		return "authentication_error"
	case errs.Forbidden:
		return "permission_error"
	case errs.RateLimited:
		return "rate_limit_error"
	case errs.Unavailable:
		return "overloaded_error"
	case errs.Timeout:
		return "timeout_error"
	}
	return "api_error"
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
