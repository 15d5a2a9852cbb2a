package browser

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
