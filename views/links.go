package views

import (
	"net/url"
	"strings"

	"github.com/a-h/templ"
)

// ExternalURL is the one way an address that comes from data (server state, a setting, an
// upstream) becomes a link on a page: an absolute https address always, an http one only when
// allowHTTP (the configured Claude sign-in address is itself http: a test or an air-gapped
// install). Anything else (javascript:, data:, a relative or host-less address) is no link:
// ok is false and the page shows the address as text.
func ExternalURL(raw string, allowHTTP bool) (href templ.SafeURL, ok bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" || u.Host == "" || u.User != nil {
		return "", false
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
	case "http":
		if !allowHTTP {
			return "", false
		}
	default:
		return "", false
	}
	return templ.SafeURL(raw), true
}
