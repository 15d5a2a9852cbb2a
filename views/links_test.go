package views

import "testing"

func TestExternalURL(t *testing.T) {
	for _, tc := range []struct {
		name, in  string
		allowHTTP bool
		ok        bool
	}{
		{"https", "https://claude.ai/oauth/authorize?state=x", false, true},
		{"https, upper-case scheme", "HTTPS://claude.ai/oauth/authorize", false, true},
		{"http refused by default", "http://evil.example/authorize", false, false},
		{"http when the sign-in address is http", "http://127.0.0.1:9/oauth/authorize", true, true},
		{"javascript", "javascript:alert(1)", true, false},
		{"javascript, mixed case", "JavaScript:alert(1)", true, false},
		{"data", "data:text/html,<script>alert(1)</script>", true, false},
		{"relative", "/providers", true, false},
		{"scheme-relative", "//evil.example/x", true, false},
		{"no host", "https:///path", true, false},
		{"user-info", "https://user:pw@claude.ai/", true, false},
		{"garbage", "%zz", true, false},
		{"empty", "", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			href, ok := ExternalURL(tc.in, tc.allowHTTP)
			if ok != tc.ok || (ok && string(href) != tc.in) || (!ok && href != "") {
				t.Fatalf("ExternalURL(%q, %v) = %q, %v", tc.in, tc.allowHTTP, href, ok)
			}
		})
	}
}
