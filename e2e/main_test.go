package e2e

import (
	"net/http"
	"testing"

	"go.uber.org/goleak"

	"switchyard/e2e/testenv"
)

// TestMain fails the package when any test leaves a goroutine behind: every app a test starts
// must stop its background work, and every proxied request and stream must end its goroutines.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(closingIdle{m},
		// Idle keep-alive connections of test HTTP clients belong to the clients, not the gateway.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
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

// closingIdle closes the test clients' idle connections after the tests, before the check.
type closingIdle struct{ m *testing.M }

func (c closingIdle) Run() int {
	code := c.m.Run()
	http.DefaultClient.CloseIdleConnections()
	testenv.ChatClient.CloseIdleConnections()
	return code
}
