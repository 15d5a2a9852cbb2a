package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
)

// ServedSurfaces lists the client surfaces whose requests reach providers of a type today. A
// type with none can be configured (and its models discovered), but no client request is sent
// to it yet; the dashboard marks such providers from this list, so it follows the engine.
func ServedSurfaces(providerType string) []string {
	if isAnthropic(providerType) {
		// Native on messages and count_tokens; chat completions through translation.
		return []string{"/v1/messages", "/v1/messages/count_tokens", "/v1/chat/completions", "/v1/responses"}
	}
	// Native on chat completions (and Responses for openai); the rest through translation, and
	// count_tokens answered with the gateway's own estimate.
	return []string{"/v1/chat/completions", "/v1/messages", "/v1/messages/count_tokens", "/v1/responses"}
}

// FetchError is why a provider's model list could not be fetched, in parts a reader's language
// can frame: what kind of failure, the upstream's status and the start of its answer.
type FetchError struct {
	// Kind is "status" (the upstream answered Status), "redirect" (it answered Status, a redirect
	// to Excerpt, which is not followed), "transport", "timeout", "not_a_list" or
	// "no_connection".
	Kind   string
	Status int
	// Excerpt is the start of the upstream's answer; it may echo a credential, so it is redacted
	// before it is shown.
	Excerpt string
	Err     error
}

// Error is the failure in English, for logs and the admin API.
func (e *FetchError) Error() string {
	switch e.Kind {
	case "status":
		return fmt.Sprintf("list models: upstream answered HTTP %d: %s", e.Status, e.Excerpt)
	case "redirect":
		return fmt.Sprintf("list models: upstream answered HTTP %d, a redirect to %q, which is not followed", e.Status, e.Excerpt)
	case "not_a_list":
		return fmt.Sprintf("list models: not a model list: %v", e.Err)
	case "no_connection":
		return "no usable connection"
	}
	return fmt.Sprintf("list models: %v", e.Err)
}

// Unwrap returns the transport or decoding error, if any.
func (e *FetchError) Unwrap() error { return e.Err }

// transportFetchError classifies an error of the model list call.
func transportFetchError(err error) *FetchError {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return &FetchError{Kind: "timeout", Err: err}
	}
	return &FetchError{Kind: "transport", Err: err}
}

// AsFetchError returns err's FetchError, nil when it has none.
func AsFetchError(err error) *FetchError {
	var fe *FetchError
	if errors.As(err, &fe) {
		return fe
	}
	return nil
}
