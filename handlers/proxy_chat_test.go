package handlers

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestReadAll: a body is read whole whatever its declared size says (exact, unknown, too
// small, too large) and however the reader hands it out, and a read error is returned.
func TestReadAll(t *testing.T) {
	body := strings.Repeat("0123456789abcdef", 4096) + "tail"
	for _, size := range []int64{int64(len(body)), -1, 0, 10, int64(len(body)) - 1, int64(len(body)) + 100} {
		for name, r := range map[string]func() io.Reader{
			"plain":      func() io.Reader { return strings.NewReader(body) },
			"one byte":   func() io.Reader { return iotest.OneByteReader(strings.NewReader(body)) },
			"data+EOF":   func() io.Reader { return iotest.DataErrReader(strings.NewReader(body)) },
			"half reads": func() io.Reader { return iotest.HalfReader(strings.NewReader(body)) },
		} {
			got, err := readAll(r(), size)
			if err != nil || string(got) != body {
				t.Fatalf("%s, size %d: %d bytes, %v", name, size, len(got), err)
			}
		}
	}
	boom := errors.New("boom")
	if _, err := readAll(io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(boom)), 10); !errors.Is(err, boom) {
		t.Fatalf("error %v, want boom", err)
	}
	if got, err := readAll(bytes.NewReader(nil), 0); err != nil || len(got) != 0 {
		t.Fatalf("empty body: %q %v", got, err)
	}
}

// BenchmarkReadAll reads a 200 KB request body (a coding agent's) with its length declared.
func BenchmarkReadAll(b *testing.B) {
	body := bytes.Repeat([]byte(`{"role":"user","content":"0123456789"},`), 5000)
	b.Run("io.ReadAll", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = io.ReadAll(bytes.NewReader(body))
		}
	})
	b.Run("sized", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = readAll(bytes.NewReader(body), int64(len(body)))
		}
	})
}
