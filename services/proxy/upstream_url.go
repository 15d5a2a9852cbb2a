package proxy

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"sync"
)

// maxCachedURLs bounds urlCache: the addresses are the providers' base URLs (and the API bases
// Copilot tokens name) times a few paths, so a real gateway stays far below it; past it each
// call parses its address again.
const maxCachedURLs = 1024

// urlCache keeps the parsed upstream address of each base URL and path: parsing it again for
// every attempt showed in the per-request CPU. The cached *url.URL is shared and never changed.
type urlCache struct {
	mu sync.RWMutex
	m  map[string]*url.URL
}

func (uc *urlCache) get(base, path string) (*url.URL, error) {
	key := base + path
	uc.mu.RLock()
	u, ok := uc.m[key]
	uc.mu.RUnlock()
	if ok {
		return u, nil
	}
	u, err := url.Parse(key)
	if err != nil {
		return nil, err
	}
	uc.mu.Lock()
	if uc.m == nil {
		uc.m = make(map[string]*url.URL)
	}
	if len(uc.m) < maxCachedURLs {
		uc.m[key] = u
	}
	uc.mu.Unlock()
	return u, nil
}

// newUpstreamRequest is http.NewRequestWithContext(ctx, POST, base+path, body) with the address
// parsed once per base and path.
func (e *Engine) newUpstreamRequest(ctx context.Context, base, path string, body []byte, h http.Header) (*http.Request, error) {
	u, err := e.urls.get(base, path)
	if err != nil {
		return nil, err
	}
	// An empty address parses to nothing; the shared one is set below (the transport only reads it).
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.URL, req.Host, req.Header = u, u.Host, h
	return req, nil
}
