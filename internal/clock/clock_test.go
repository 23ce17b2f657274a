package clock

import (
	"testing"
	"time"
)

func TestFakeMovesOnlyWhenTold(t *testing.T) {
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.FixedZone("x", 3600))
	f := NewFake(start)
	if got := f.Now(); !got.Equal(start) || got.Location() != time.UTC {
		t.Fatalf("Now() = %v, want %v in UTC", got, start)
	}
	if got := f.Advance(90 * time.Second); !got.Equal(start.Add(90 * time.Second)) {
		t.Fatalf("Advance returned %v", got)
	}
	if got := f.Now(); !got.Equal(start.Add(90 * time.Second)) {
		t.Fatalf("Now() after Advance = %v", got)
	}
	later := start.Add(time.Hour)
	f.Set(later)
	if got := f.Now(); !got.Equal(later) {
		t.Fatalf("Now() after Set = %v", got)
	}
}

func TestSystemEntropyReads(t *testing.T) {
	b := make([]byte, 32)
	if _, err := SystemEntropy().Read(b); err != nil {
		t.Fatal(err)
	}
	if (System{}).Now().Location() != time.UTC {
		t.Fatal("System clock is not UTC")
	}
}
