package proxy

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReadBody(t *testing.T) {
	body := strings.Repeat("0123456789", 1000) // 10 KB, as a long answer
	boom := errors.New("connection reset")
	for _, tc := range []struct {
		name        string
		r           io.Reader
		size, limit int64
		want        string
		err         error
		wantCap     int // 0: any
	}{
		{name: "known length", r: strings.NewReader(body), size: 10000, limit: 1 << 20, want: body, wantCap: 10001},
		{name: "known length, one byte at a time", r: iotest.OneByteReader(strings.NewReader(body)), size: 10000, limit: 1 << 20, want: body, wantCap: 10001},
		{name: "unknown length", r: iotest.HalfReader(strings.NewReader(body)), size: -1, limit: 1 << 20, want: body},
		{name: "empty", r: strings.NewReader(""), size: 0, limit: 1 << 20, want: ""},
		{name: "longer than said", r: strings.NewReader(body), size: 10, limit: 1 << 20, want: body},
		{name: "shorter than said", r: strings.NewReader("short"), size: 10000, limit: 1 << 20, want: "short"},
		{name: "cut at the limit", r: strings.NewReader(body), size: -1, limit: 4097, want: body[:4097]},
		{name: "cut at the limit, length said", r: strings.NewReader(body), size: 10000, limit: 4097, want: body[:4097]},
		{name: "read error", r: io.MultiReader(strings.NewReader("part"), iotest.ErrReader(boom)), size: -1, limit: 1 << 20, want: "part", err: boom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readBody(tc.r, tc.size, tc.limit, nil)
			if string(got) != tc.want {
				t.Errorf("read %d bytes, want %d", len(got), len(tc.want))
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("err = %v, want %v", err, tc.err)
			}
			if tc.wantCap != 0 && cap(got) != tc.wantCap {
				t.Errorf("cap = %d, want %d: a known length is read into one buffer of its size", cap(got), tc.wantCap)
			}
		})
	}
}

// An answer of unknown length is read in reads of doubling room from 4 KiB, not from a few bytes.
func TestReadBodyUnknownLengthGrows(t *testing.T) {
	body := strings.Repeat("0123456789", 10000) // 100 KB
	r := &countingReader{r: strings.NewReader(body)}
	got, err := readBody(r, -1, 1<<20, nil)
	if err != nil || string(got) != body {
		t.Fatalf("read %d bytes, err %v", len(got), err)
	}
	if r.reads > 7 { // 4 + 4 + 8 + 16 + 32 + 64 KiB, then the end
		t.Errorf("%d reads for 100 KB, want at most 7", r.reads)
	}
}

type countingReader struct {
	r     io.Reader
	reads int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.reads++
	return c.r.Read(p)
}

// A buffer from the pool that has room for the answer is read into as it is: no allocation.
func TestReadBodyReusesRoom(t *testing.T) {
	body := []byte(strings.Repeat("x", 10<<10))
	dst := make([]byte, 0, 64<<10)
	r := bytes.NewReader(body)
	allocs := testing.AllocsPerRun(50, func() {
		r.Reset(body)
		got, err := readBody(r, int64(len(body)), 1<<20, dst[:0])
		if err != nil || len(got) != len(body) || &got[0] != &dst[:1][0] {
			t.Fatalf("read %d bytes (err %v), or not into the given buffer", len(got), err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per read into a buffer with room, want 0", allocs)
	}
}

func TestReadAnswerBounds(t *testing.T) {
	e := &Engine{opt: Options{MaxResponseBytes: 100}}
	answer := func(s string, size int64) *http.Response {
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(s)), ContentLength: size}
	}
	b, buf, _, ok := e.readAnswer("p", answer(strings.Repeat("a", 100), 100))
	if !ok || len(b) != 100 || buf == nil || &(*buf)[0] != &b[0] {
		t.Fatalf("an answer at the bound: ok %v, %d bytes, buffer %v", ok, len(b), buf != nil)
	}
	releaseAnswer(buf)
	for _, size := range []int64{101, -1, 50} { // said, unsaid, and understated
		_, buf, failed, ok := e.readAnswer("p", answer(strings.Repeat("a", 101), size))
		if ok || buf != nil || failed.err == nil || failed.err.Reason != "upstream_response_too_large" || failed.status != http.StatusBadGateway {
			t.Errorf("size %d: an answer over the bound: ok %v, failure %+v", size, ok, failed.err)
		}
	}
	_, _, failed, ok := e.readAnswer("p", &http.Response{StatusCode: 200, ContentLength: -1,
		Body: io.NopCloser(io.MultiReader(strings.NewReader(`{"id":`), iotest.ErrReader(io.ErrUnexpectedEOF)))})
	if ok || !failed.transport || failed.err.Reason != "upstream_unreachable" {
		t.Errorf("an answer cut short: ok %v, transport %v, failure %+v", ok, failed.transport, failed.err)
	}
}
