package e2e

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"switchyard/e2e/testenv"
)

var assetRef = regexp.MustCompile(`(?:href|src)="(/static/[^"?]+\?v=[0-9a-f]+)"`)

// TestAssetsCompressedAndCacheable: pages link their CSS and JS by content hash; those answers
// are gzipped and cacheable for a year, a plain address revalidates with its ETag (304), and
// pages themselves are gzipped too. The proxy surface is never compressed by the gateway.
func TestAssetsCompressedAndCacheable(t *testing.T) {
	e := testenv.New(t)
	c := e.Login()
	get := func(path string, h map[string]string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", e.Base+path, nil)
		req.Header.Set("Accept-Encoding", "gzip") // set by hand: the client then leaves the body compressed
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		testenv.ReadAll(t, resp)
		return resp
	}
	page := get("/", nil)
	if page.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("the overview is not compressed: %v", page.Header)
	}
	_, body := testenv.Fetch(t, c, "GET", e.Base+"/", nil, nil)
	refs := assetRef.FindAllStringSubmatch(body, -1)
	if len(refs) < 3 {
		t.Fatalf("the page links %d fingerprinted assets: %v", len(refs), refs)
	}
	for _, m := range refs {
		resp := get(m[1], nil)
		small := resp.ContentLength >= 0 && resp.ContentLength < 512 // not worth compressing
		if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "gzip" && !small ||
			!strings.Contains(resp.Header.Get("Cache-Control"), "immutable") || resp.Header.Get("ETag") == "" {
			t.Errorf("%s: %d %v", m[1], resp.StatusCode, resp.Header)
		}
		plain, _, _ := strings.Cut(m[1], "?")
		resp = get(plain, nil)
		if resp.Header.Get("Cache-Control") != "no-cache" {
			t.Errorf("%s without its hash: Cache-Control %q", plain, resp.Header.Get("Cache-Control"))
		}
		if again := get(plain, map[string]string{"If-None-Match": resp.Header.Get("ETag")}); again.StatusCode != http.StatusNotModified {
			t.Errorf("%s revalidated: %d, want 304", plain, again.StatusCode)
		}
	}
	if resp := get("/static/app.css?v=0000", nil); strings.Contains(resp.Header.Get("Cache-Control"), "immutable") {
		t.Error("a stale hash must not be cached for a year")
	}
	if resp := get("/static/nope.css", nil); resp.StatusCode != 404 {
		t.Errorf("unknown file: %d", resp.StatusCode)
	}
	key := e.NewKey()
	_, h, _ := testenv.Call(t, http.DefaultClient, "GET", e.Base+"/v1/models", "",
		map[string]string{"Authorization": "Bearer " + key, "Accept-Encoding": "gzip"})
	if h.Get("Content-Encoding") != "" {
		t.Error("the proxy surface was compressed")
	}
}
