package e2e

import (
	"testing"

	"go.uber.org/goleak"

	"switchyard/e2e/testenv"
)

func TestMain(m *testing.M) {
	testenv.RunCheckingLeaks(m,
		// toxiproxy's limit_data toxic (the chaos tests' cut stream) ends its stage without
		// draining the stages before it: a chunk the upstream sent after the cut leaves the
		// link's reader (ChanWriter.Write) and the noop first stage (NoopToxic.Pipe) blocked on
		// channel sends that nothing will ever receive, and Proxy.Stop closes the sockets but
		// cannot unblock a channel send. Whether it happens depends on how the upstream's events
		// fall into TCP reads. The gateway's side of that connection is checked to be closed by
		// TestChaosCutStreamEndsWithStreamIncomplete.
		goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/stream.(*ChanWriter).Write"),
		goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*NoopToxic).Pipe"),
	)
}
