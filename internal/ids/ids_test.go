package ids

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/clock"
)

func TestNewIsPrefixedAndIncreasing(t *testing.T) {
	c := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	g := NewGenerator(c, bytes.NewReader(bytes.Repeat([]byte{7}, 4096)))
	prev := ""
	for i := 0; i < 50; i++ {
		id := g.New(Work)
		if !HasPrefix(id, Work) {
			t.Fatalf("id %q lacks the %s_ prefix", id, Work)
		}
		if id != strings.ToLower(id) {
			t.Fatalf("id %q is not lower case", id)
		}
		if id <= prev {
			t.Fatalf("id %q does not sort after %q within one millisecond", id, prev)
		}
		prev = id
	}
	c.Advance(time.Millisecond)
	if next := g.New(Work); next <= prev {
		t.Fatalf("id %q after the clock moved does not sort after %q", next, prev)
	}
}

func TestDeriveIsStableAndUnambiguous(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	a := Derive(Work, at, "exe_1", "req-1")
	if b := Derive(Work, at, "exe_1", "req-1"); a != b {
		t.Fatalf("Derive is not stable: %q then %q", a, b)
	}
	// Joining must not be ambiguous: ("ab","c") and ("a","bc") differ.
	if Derive(Work, at, "ab", "c") == Derive(Work, at, "a", "bc") {
		t.Fatal("Derive joins its parts ambiguously")
	}
	if Derive(Work, at, "exe_1", "req-2") == a {
		t.Fatal("Derive gives two requests the same id")
	}
	if !HasPrefix(a, Work) || HasPrefix(a, Event) {
		t.Fatalf("Derive prefix wrong: %q", a)
	}
}

func TestDeriveWithZeroTimeUsesTheWholeHash(t *testing.T) {
	a := Derive(Work, time.Time{}, "key-1")
	b := Derive(Work, time.Time{}, "key-2")
	if strings.HasPrefix(a, Work+"_000") || strings.HasPrefix(b, Work+"_000") {
		t.Fatalf("zero-time derived ids still start with a zero time field: %q %q", a, b)
	}
	if a == b || a != Derive(Work, time.Time{}, "key-1") {
		t.Fatalf("zero-time Derive is not stable and distinct: %q %q", a, b)
	}
	if len(a) != len(Work)+1+26 {
		t.Fatalf("derived id %q has the wrong length", a)
	}
}
