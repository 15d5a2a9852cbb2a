package e2e

import (
	"html"
	"net/url"
	"strings"
	"testing"

	"switchyard/e2e/testenv"
	"switchyard/i18n"
)

// The sign-in link on the Claude card comes from the sign-in the server keeps: a completion form
// that carries an address of its own (javascript:, or an http page elsewhere) never gets it
// rendered as a link, whatever else the form says.
func TestClaudeSignInLinkComesFromTheServer(t *testing.T) {
	e, _, _ := claudeSetup(t, nil)
	admin := e.Login()
	st, page := postForm(t, admin, e.Base+"/oauth/claude/start", url.Values{"provider": {"anthropic"}}, i18n.EN)
	href := html.UnescapeString(testenv.Between(page, `<a href="`, `" target="_blank" rel="noopener noreferrer" id="claude-auth-link"`))
	state := html.UnescapeString(testenv.Between(page, `<input type="hidden" name="state" value="`, `"`))
	if st != 200 || !strings.HasPrefix(href, "https://claude.ai/oauth/authorize?") || state == "" || !strings.Contains(href, "state="+state) {
		t.Fatalf("start: %d, link %q, state %q", st, href, state)
	}
	for _, forged := range []string{"javascript:alert(document.cookie)", "http://evil.example/authorize", "https://evil.example/authorize"} {
		// With the state of the pending sign-in: the server's link again.
		st, page := postForm(t, admin, e.Base+"/oauth/claude/complete", url.Values{"auth_url": {forged}, "state": {state}, "code": {""}}, i18n.EN)
		if st != 422 || strings.Contains(page, "evil.example") || strings.Contains(page, "javascript:") ||
			html.UnescapeString(testenv.Between(page, `<a href="`, `" target="_blank" rel="noopener noreferrer" id="claude-auth-link"`)) != href {
			t.Fatalf("%s with the pending state: %d", forged, st)
		}
		// Without one (or with a state that is none of ours): the first step, no link at all.
		for _, s := range []string{"", "forged-state"} {
			st, page := postForm(t, admin, e.Base+"/oauth/claude/complete", url.Values{"auth_url": {forged}, "state": {s}, "code": {"x#" + s}}, i18n.EN)
			if st != 422 || strings.Contains(page, "claude-auth-link") || strings.Contains(page, "evil.example") ||
				strings.Contains(page, "javascript:") || !strings.Contains(page, `id="claude-start"`) {
				t.Fatalf("%s with state %q: %d", forged, s, st)
			}
		}
	}
}
