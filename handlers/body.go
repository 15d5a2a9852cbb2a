package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"unicode"

	"github.com/labstack/echo/v4"

	"switchyard/services/errs"
)

// maxAdminBody bounds an admin API request body.
const maxAdminBody = 1 << 20

// maxJSONDepth bounds the nesting of an admin API request body.
const maxJSONDepth = 64

// readAdminBody reads the whole body within maxAdminBody.
func readAdminBody(c echo.Context) ([]byte, error) {
	raw, err := io.ReadAll(http.MaxBytesReader(c.Response(), c.Request().Body, maxAdminBody))
	if err != nil {
		return nil, BodyError(err)
	}
	return raw, nil
}

// BodyError says why a request body could not be read: too large, too slow (the edge's read
// deadline passed: 408, and the connection closes) or cut off.
func BodyError(err error) *errs.Error {
	var tooLarge *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &tooLarge):
		return errs.Wrap(err, errs.TooLarge, "err.body_too_large", tooLarge.Limit>>10)
	case errors.As(err, &ne) && ne.Timeout():
		return &errs.Error{Code: errs.Timeout, Status: http.StatusRequestTimeout, Reason: "request_timeout", Msg: errs.M("err.body_timeout"), Err: err}
	}
	return &errs.Error{Code: errs.Invalid, Status: http.StatusBadRequest, Reason: "bad_body", Msg: errs.M("err.bad_body"), Err: err}
}

// strictJSON accepts exactly one JSON value with no key twice in any object. encoding/json
// keeps the last of two equal keys (and matches struct fields case-insensitively) and stops
// reading after the first value, so without this check a body could be validated on one value
// and acted on with another. Keys are compared the way encoding/json matches them: equal under
// Unicode case folding. Syntax errors get Reason "bad_json", the other refusals their own; all
// are 400 (a malformed body, where 422 names fields that failed validation).
func strictJSON(raw []byte) *errs.Error {
	type frame struct {
		obj     bool
		wantKey bool
		seen    map[string]struct{}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return &errs.Error{Code: errs.Invalid, Status: http.StatusBadRequest, Reason: "bad_json", Msg: errs.M("err.bad_json", err.Error()), Err: err}
		}
		n := len(stack)
		switch {
		case n > 0 && stack[n-1].obj && stack[n-1].wantKey && tok != json.Delim('}'):
			key, _ := tok.(string) // the decoder allows only a string here
			f := foldKey(key)
			if _, dup := stack[n-1].seen[f]; dup {
				return &errs.Error{Code: errs.Invalid, Status: http.StatusBadRequest, Reason: "duplicate_key", Msg: errs.M("err.json_duplicate_key", key)}
			}
			stack[n-1].seen[f] = struct{}{}
			stack[n-1].wantKey = false
			continue
		case tok == json.Delim('{') || tok == json.Delim('['):
			if n >= maxJSONDepth {
				return &errs.Error{Code: errs.Invalid, Status: http.StatusBadRequest, Reason: "too_deep", Msg: errs.M("err.json_too_deep", maxJSONDepth)}
			}
			f := &frame{obj: tok == json.Delim('{'), wantKey: true}
			if f.obj {
				f.seen = map[string]struct{}{}
			}
			stack = append(stack, f)
			continue
		case tok == json.Delim('}') || tok == json.Delim(']'):
			stack = stack[:n-1]
		}
		// A value is complete: the document, or the member or element of a container.
		if len(stack) == 0 {
			break
		}
		if top := stack[len(stack)-1]; top.obj {
			top.wantKey = true
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return &errs.Error{Code: errs.Invalid, Status: http.StatusBadRequest, Reason: "trailing_data", Msg: errs.M("err.json_trailing_data"), Err: err}
	}
	return nil
}

// foldKey maps a key to one representative of its case-folding class (each rune to the
// smallest rune of its unicode.SimpleFold orbit), so two keys that strings.EqualFold calls
// equal fold to the same string.
func foldKey(k string) string {
	var b strings.Builder
	b.Grow(len(k))
	for _, r := range k {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		b.WriteRune(m)
	}
	return b.String()
}
