package web

import (
	"slices"
	"testing"

	"switchyard/services/proxy"
	"switchyard/services/traffic"
)

// TestFromTraceNamesDropped: what the engine dropped in translation reaches the request log's
// entry.
func TestFromTraceNamesDropped(t *testing.T) {
	var e traffic.Entry
	fromTrace(&e, &proxy.Trace{Provider: "anthropic", Dropped: []string{"tools.web_search", "logprobs"}})
	if !slices.Equal(e.Dropped, []string{"tools.web_search", "logprobs"}) {
		t.Fatalf("entry dropped %q", e.Dropped)
	}
	e = traffic.Entry{}
	if fromTrace(&e, &proxy.Trace{}); e.Dropped != nil {
		t.Fatalf("nothing dropped, entry says %q", e.Dropped)
	}
}
