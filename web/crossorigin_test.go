package web

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// Without Sec-Fetch-Site and Origin (older browsers), a state-changing request is judged by its
// Referer: another host, or a Referer that cannot be read, refuses it.
func TestCrossOriginFallsBackToTheReferer(t *testing.T) {
	cases := []struct {
		name, method string
		header       map[string]string
		refused      bool
	}{
		{"no browser headers", "POST", nil, false},
		{"same-origin referer", "POST", map[string]string{"Referer": "http://gw.test:8080/keys"}, false},
		{"same-origin referer, other case", "POST", map[string]string{"Referer": "http://GW.test:8080/keys"}, false},
		{"cross-origin referer", "POST", map[string]string{"Referer": "http://evil.example/page"}, true},
		{"other port", "POST", map[string]string{"Referer": "http://gw.test:9090/"}, true},
		{"unreadable referer", "POST", map[string]string{"Referer": "::not a url"}, true},
		{"referer without host", "DELETE", map[string]string{"Referer": "/keys"}, true},
		{"safe method", "GET", map[string]string{"Referer": "http://evil.example/"}, false},
		{"Origin decides", "POST", map[string]string{"Origin": "http://gw.test:8080", "Referer": "http://evil.example/"}, false},
		{"Sec-Fetch-Site decides", "POST", map[string]string{"Sec-Fetch-Site": "same-origin", "Referer": "http://evil.example/"}, false},
	}
	for _, c := range cases {
		r := httptest.NewRequest(c.method, "http://gw.test:8080/keys", nil)
		for k, v := range c.header {
			r.Header.Set(k, v)
		}
		err := http.NewCrossOriginProtection().Check(r)
		if err == nil {
			err = crossOriginReferer(r)
		}
		if (err != nil) != c.refused {
			t.Errorf("%s: err %v, want refused %v", c.name, err, c.refused)
		}
	}
}
