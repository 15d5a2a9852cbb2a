package traffic

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// awkward are strings encoding/json escapes one way or another.
var awkward = []string{"", "plain", `quo"te`, `back\slash`, "<script>&amp;</script>", "\b\f\n\r\t", "\x00\x01\x1f\x7f",
	"ünïcödé 日本語 😀", "bad\xffutf8\xc3", "\u2028\u2029", "\ufffd", "sk-…[redacted]", strings.Repeat("x", 300)}

func marshalled(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRowJSONMatchesEncodingJSON: the request log's JSON columns written by hand are
// json.Marshal's bytes, "[]" for none, for awkward strings and extreme numbers.
func TestRowJSONMatchesEncodingJSON(t *testing.T) {
	if chainJSON(nil) != "[]" || skippedJSON(nil) != "[]" || routeJSON(nil) != "[]" || chainJSON([]Attempt{}) != "[]" {
		t.Fatal("no attempts, skips or route steps must be []")
	}
	var chain []Attempt
	var skipped []Skip
	for i, s := range awkward {
		chain = append(chain, Attempt{ConnectionID: int64(i) - 3, Connection: s, Kind: awkward[(i+1)%len(awkward)], Status: 100 * i,
			Reason: awkward[(i+2)%len(awkward)], Duration: time.Duration(i) * 1234567, Detail: awkward[(i+3)%len(awkward)],
			Target: awkward[(i+4)%len(awkward)]})
		skipped = append(skipped, Skip{Connection: s, Reason: awkward[(i+1)%len(awkward)], Detail: awkward[(i+2)%len(awkward)],
			Target: awkward[(i+3)%len(awkward)], SecondsLeft: int64(i) * -77})
	}
	chain = append(chain, Attempt{ConnectionID: 1 << 62, Duration: -1}, Attempt{ConnectionID: -1 << 63, Status: -1, Duration: 1<<63 - 1})
	skipped = append(skipped, Skip{SecondsLeft: -1 << 63})
	for i := range chain {
		if got, want := chainJSON(chain[i:i+1]), marshalled(t, chain[i:i+1]); got != want {
			t.Fatalf("attempt %d:\n got %s\nwant %s", i, got, want)
		}
	}
	if got, want := chainJSON(chain), marshalled(t, chain); got != want {
		t.Fatalf("chain:\n got %s\nwant %s", got, want)
	}
	if got, want := skippedJSON(skipped), marshalled(t, skipped); got != want {
		t.Fatalf("skipped:\n got %s\nwant %s", got, want)
	}
	route := []RouteStep{{Target: "a/b", Via: []string{"c"}, Round: 1, Outcome: "answered", Until: time.Unix(1700000000, 5).UTC()}}
	if got, want := routeJSON(route), marshalled(t, route); got != want {
		t.Fatalf("route:\n got %s\nwant %s", got, want)
	}
}

// FuzzAppendJSONString compares the hand-written string encoding with encoding/json's.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range awkward {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := string(appendJSONString(nil, s)), marshalled(t, s); got != want {
			t.Fatalf("%q:\n got %s\nwant %s", s, got, want)
		}
	})
}

// BenchmarkRowJSON is the JSON of a request's columns with one attempt and no skips or route:
// by hand, and through json.Marshal as before.
func BenchmarkRowJSON(b *testing.B) {
	chain := []Attempt{{ConnectionID: 1, Connection: "bench-1", Kind: "first", Status: 200, Duration: 423 * time.Microsecond}}
	b.Run("marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c, _ := json.Marshal(chain)
			s, _ := json.Marshal([]Skip{})
			r, _ := json.Marshal([]RouteStep{})
			_, _, _ = string(c), string(s), string(r)
		}
	})
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _, _ = chainJSON(chain), skippedJSON(nil), routeJSON(nil)
		}
	})
}
