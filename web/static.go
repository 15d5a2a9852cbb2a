package web

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"switchyard/views"
)

// assets are the embedded static files with a content hash each. Pages link them as
// /static/<name>?v=<hash>: such a response may be cached for a year (the address changes when
// the file does); any other request for a file is answered with its ETag and no-cache, so a
// browser revalidates it and gets 304 while it is unchanged.
type assets struct {
	files map[string]asset
}

type asset struct {
	body []byte
	hash string
}

func newAssets(fsys fs.FS) (*assets, error) {
	a := &assets{files: map[string]asset{}}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		a.files[p] = asset{body: b, hash: hex.EncodeToString(sum[:6])}
		return nil
	})
	return a, err
}

// url is the fingerprinted address of a file (the plain address when it is unknown).
func (a *assets) url(name string) string {
	if f, ok := a.files[name]; ok {
		return "/static/" + name + "?v=" + f.hash
	}
	return "/static/" + name
}

// serve answers GET /static/*.
func (a *assets) serve(c echo.Context) error {
	name := c.Param("*")
	f, ok := a.files[name]
	if !ok {
		return echo.ErrNotFound
	}
	h := c.Response().Header()
	h.Set("ETag", `"`+f.hash+`"`)
	if c.QueryParam("v") == f.hash {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	if ct := mime.TypeByExtension(path.Ext(name)); ct != "" {
		h.Set(echo.HeaderContentType, ct)
	}
	http.ServeContent(c.Response(), c.Request(), name, time.Time{}, bytes.NewReader(f.body))
	return nil
}

// withAssets lets the views link the fingerprinted files. The proxy surfaces render no view
// (their errors are JSON in the client's format), so their requests are not copied for it.
func withAssets(a *assets) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if isProxyPath(r.URL.Path) {
				return next(c)
			}
			c.SetRequest(r.WithContext(views.WithAssets(r.Context(), a.url)))
			return next(c)
		}
	}
}

// compress gzips pages, fragments, API answers and static files for clients that accept it. The
// proxy surfaces are left alone (streams are flushed event by event, and clients bring their
// own expectations), as are the probes and the metrics. Those bypass echo's gzip middleware
// instead of passing through its skipper: its frame (larger than this one's) would otherwise sit
// under the handler of every open stream.
func compress() echo.MiddlewareFunc {
	skip := func(c echo.Context) bool {
		p := c.Request().URL.Path
		return isProxyPath(p) || p == "/metrics" || p == "/health" || p == "/ready"
	}
	gzip := middleware.GzipWithConfig(middleware.GzipConfig{MinLength: 512, Skipper: skip})
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		zipped := gzip(next)
		return func(c echo.Context) error {
			if skip(c) {
				return next(c)
			}
			return zipped(c)
		}
	}
}
