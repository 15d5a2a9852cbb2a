package resilience

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

func TestAnswerItems(t *testing.T) {
	clock := clockwork.NewFakeClock()
	a := NewAnswerItems(clock, time.Hour, 100, 1<<20)
	look := func(key int64, id string) string { return string(a.Lookup(key, id)) }
	a.Keep(1, "msg_a", `{"id":"msg_a","text":"one"}`)
	a.Keep(1, "", `{"text":"no id"}`)
	if got := look(1, "msg_a"); got != `{"id":"msg_a","text":"one"}` {
		t.Fatalf("held item: %q", got)
	}
	if a.Lookup(2, "msg_a") != nil || a.Lookup(1, "msg_z") != nil {
		t.Fatal("another client key's item, or an id never kept, is held")
	}
	a.Keep(1, "msg_a", `{"id":"msg_a","text":"one"}`) // the same answer kept again
	if a.Len() != 1 || a.Bytes() != len(`{"id":"msg_a","text":"one"}`) {
		t.Fatalf("%d items of %d bytes, want the one with an id, once", a.Len(), a.Bytes())
	}

	// An item lasts the TTL after it was made or last named.
	a.Keep(1, "msg_b", `{"id":"msg_b"}`)
	a.Keep(1, "msg_c", `{"id":"msg_c"}`)
	clock.Advance(40 * time.Minute)
	look(1, "msg_b")
	clock.Advance(30 * time.Minute)
	if look(1, "msg_c") != "" {
		t.Fatal("msg_c is held 70 minutes after it was kept")
	}
	if look(1, "msg_b") == "" {
		t.Fatal("msg_b, named 30 minutes ago, is gone")
	}
	clock.Advance(2 * time.Hour)
	if n := a.Sweep(); n != 2 || a.Len() != 0 || a.Bytes() != 0 {
		t.Fatalf("swept %d, %d left of %d bytes; want msg_a and msg_b swept, nothing left", n, a.Len(), a.Bytes())
	}
}

// The table holds at most its bytes and its count of items: the least recently used go.
func TestAnswerItemsBounds(t *testing.T) {
	clock := clockwork.NewFakeClock()
	id := func(i int) string { return fmt.Sprintf("msg_%02d", i) }
	item := func(i int) string { return fmt.Sprintf(`{"id":"%s","text":"%s"}`, id(i), strings.Repeat("x", 75)) } // 100 bytes
	a := NewAnswerItems(clock, time.Hour, 100, 1000)
	for i := range 10 {
		a.Keep(7, id(i), item(i))
	}
	a.Lookup(7, id(0)) // used: msg_01 is now the oldest
	a.Keep(7, id(10), item(10))
	if a.Lookup(7, id(1)) != nil || a.Bytes() != 1000 || a.Len() != 10 {
		t.Fatalf("over the byte bound: %d bytes in %d items; want msg_01 gone, 1000 bytes", a.Bytes(), a.Len())
	}
	if a.Lookup(7, id(0)) == nil {
		t.Fatal("the item named last went instead of the oldest")
	}
	a.Keep(7, "msg_huge", strings.Repeat("y", 1001))
	if a.Lookup(7, "msg_huge") != nil || a.Len() != 10 {
		t.Fatal("an item larger than the whole table was kept")
	}

	b := NewAnswerItems(clock, time.Hour, 3, 1<<20)
	for i := range 5 {
		b.Keep(7, id(i), item(i))
	}
	if b.Lookup(7, id(1)) != nil || b.Len() != 3 || b.Bytes() != 300 {
		t.Fatalf("over the count bound: %d items of %d bytes; want msg_01 gone, 3 of 300", b.Len(), b.Bytes())
	}
}
