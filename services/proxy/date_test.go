package proxy

import (
	"net/http"
	"testing"
	"time"
)

// The Date value is made once a second: the same list within a second, a new one in the next,
// each the second as net/http would write it.
func TestDateCache(t *testing.T) {
	var d dateCache
	at := time.Date(2026, 12, 4, 20, 15, 7, 100e6, time.FixedZone("CET", 3600))
	first := d.at(at)
	if len(first) != 1 || first[0] != "Fri, 04 Dec 2026 19:15:07 GMT" {
		t.Fatalf("Date %q", first)
	}
	if again := d.at(at.Add(800 * time.Millisecond)); &again[0] != &first[0] {
		t.Fatal("a new value within the same second")
	}
	next := d.at(at.Add(900 * time.Millisecond))
	if next[0] != "Fri, 04 Dec 2026 19:15:08 GMT" || first[0] != "Fri, 04 Dec 2026 19:15:07 GMT" {
		t.Fatalf("next second %q (the first now %q)", next, first)
	}
	if back := d.at(at); back[0] != "Fri, 04 Dec 2026 19:15:07 GMT" {
		t.Fatalf("a clock set back: %q", back)
	}
	h := http.Header{}
	setDate(h)
	if got, err := http.ParseTime(h.Get("Date")); err != nil || time.Since(got) > 2*time.Second || time.Since(got) < -time.Second {
		t.Fatalf("setDate: %q %v", h.Get("Date"), err)
	}
}
