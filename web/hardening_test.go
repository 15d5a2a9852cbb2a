package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
)

// The body deadline must never cut a handler that works longer than it: not one that read its
// whole body first (net/http clears the deadline at the body's end), and not one of a request
// without a body (net/http watches that connection for the client leaving from the start; a
// deadline would end that watch with a timeout and cancel the request's context).
func TestReadDeadlineSparesSlowHandlers(t *testing.T) {
	const timeout = 200 * time.Millisecond
	e := echo.New()
	e.Use(readDeadline(timeout, nil))
	work := func(c echo.Context) error {
		if _, err := io.ReadAll(c.Request().Body); err != nil {
			return err
		}
		select {
		case <-c.Request().Context().Done():
			return c.String(http.StatusOK, "cancelled")
		case <-time.After(3 * timeout): // a slow handler, longer than the deadline
			return c.String(http.StatusOK, "worked")
		}
	}
	e.POST("/work", work)
	e.GET("/work", work)
	srv := httptest.NewServer(e)
	defer srv.Close()
	for _, method := range []string{"POST", "GET"} {
		var body io.Reader
		if method == "POST" {
			body = strings.NewReader("some body")
		}
		req, _ := http.NewRequest(method, srv.URL+"/work", body)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "worked" {
			t.Fatalf("%s: the handler's context was cancelled by the read deadline: %q", method, b)
		}
	}
}
