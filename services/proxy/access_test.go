package proxy

import (
	"net/http"
	"testing"
)

// The lease headers never reach an upstream, whatever path the call takes: the whitelist of
// translated and same-format calls, and the passthrough of Claude Code's own requests.
func TestLeaseHeadersAreNeverForwarded(t *testing.T) {
	in := http.Header{}
	in.Set("User-Agent", "claude-cli/2.1.0 (external, cli)")
	in.Set("anthropic-version", "2023-06-01")
	in.Set(LeaseOwnerHeader, "swl_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_abcde")
	in.Set(LeaseGenerationHeader, "3")
	in.Set("x-switchyard-lease-owner", "lower-case too")
	for name, h := range map[string]http.Header{
		"messages to messages": upstreamHeader(in, FormatMessages, FormatMessages),
		"chat to chat":         upstreamHeader(in, FormatChat, FormatChat),
		"chat to messages":     upstreamHeader(in, FormatChat, FormatMessages),
		"responses":            upstreamHeader(in, FormatResponses, FormatResponses),
		"passthrough":          passthroughHeader(in),
	} {
		if h.Get(LeaseOwnerHeader) != "" || h.Get(LeaseGenerationHeader) != "" {
			t.Errorf("%s forwards a lease header: %v", name, h)
		}
		if h.Get("User-Agent") == "" {
			t.Errorf("%s lost the user agent: the check above would pass for the wrong reason", name)
		}
	}
}
