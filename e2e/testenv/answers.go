package testenv

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
)

// AllRequests returns every request the fake received so far, on any path (device flow, token
// exchange, the Copilot API and paths it does not serve).
func (f *FakeGitHub) AllRequests() []Recorded { return f.log.all() }

// RecordingProxy passes every request on to another server and records it on the way: a test
// sees each call the gateway made to a fake that records only the calls it serves.
type RecordingProxy struct {
	*httptest.Server
	log requestLog
}

// NewRecordingProxy starts a proxy to target (a server's address); it stops with the test.
func NewRecordingProxy(t testing.TB, target string) *RecordingProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &RecordingProxy{}
	next := httputil.NewSingleHostReverseProxy(u)
	p.Server = startServer(t, func(w http.ResponseWriter, r *http.Request) {
		p.log.record(r)
		next.ServeHTTP(w, r)
	})
	return p
}

// Requests returns every request passed on so far.
func (p *RecordingProxy) Requests() []Recorded { return p.log.all() }
