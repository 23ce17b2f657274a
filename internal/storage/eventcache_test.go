package storage

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestEventCacheKeepsCopiesOfCommittedEvents(t *testing.T) {
	c := NewEventCache()
	c.Put(Event{ID: "evt_1", Data: []byte(`{"a":1}`), Replayed: true})
	got, ok := c.Get("evt_1")
	if !ok || string(got.Data) != `{"a":1}` || got.Replayed {
		t.Fatalf("Get = %+v, %v; want the event, not marked replayed", got, ok)
	}
	got.Data[2] = 'b'
	if again, _ := c.Get("evt_1"); string(again.Data) != `{"a":1}` {
		t.Fatalf("a caller's change to a returned event reached the cache: %s", again.Data)
	}
	if _, ok := c.Get("evt_2"); ok {
		t.Fatal("Get found an event never put")
	}
	reads := 0
	read := func() (Event, error) { reads++; return Event{ID: "evt_3"}, nil }
	for range 2 {
		if e, err := c.Read("evt_3", read); err != nil || e.ID != "evt_3" {
			t.Fatalf("Read = %+v, %v", e, err)
		}
	}
	if reads != 1 {
		t.Fatalf("Read read the store %d times for one event, want once", reads)
	}
	for range 2 {
		if _, err := c.Lookup("evt_4", func() (Event, error) { reads++; return Event{ID: "evt_4"}, nil }); err != nil {
			t.Fatal(err)
		}
	}
	if reads != 3 {
		t.Fatalf("Lookup kept what it read inside a transaction (%d reads, want 3)", reads)
	}
	missing := errors.New("not found")
	if _, err := c.Read("evt_5", func() (Event, error) { return Event{}, missing }); err != missing {
		t.Fatalf("Read of a missing event = %v", err)
	}
	if _, ok := c.Get("evt_5"); ok {
		t.Fatal("a failed read went into the cache")
	}
	var rows TxRows
	rows.KeepEvent(Event{ID: "evt_6"})
	c.Committed(&rows)
	if _, ok := c.Get("evt_6"); !ok {
		t.Fatal("Committed did not keep the transaction's event")
	}
}

func TestEventCacheIsBounded(t *testing.T) {
	c := NewEventCache()
	for i := range maxEvents + 10 {
		c.Put(Event{ID: fmt.Sprint("evt_", i), Data: []byte(`{}`)})
	}
	if n := c.Len(); n != maxEvents {
		t.Fatalf("the cache holds %d events, want %d", n, maxEvents)
	}
	if _, ok := c.Get("evt_0"); ok {
		t.Fatal("the oldest event was not the one dropped")
	}
	if _, ok := c.Get(fmt.Sprint("evt_", maxEvents+9)); !ok {
		t.Fatal("the newest event was dropped")
	}

	c = NewEventCache()
	c.Put(Event{ID: "evt_big", Data: []byte(strings.Repeat("x", maxCachedData+1))})
	if c.Len() != 0 {
		t.Fatal("an event larger than maxCachedData was kept")
	}
	data := []byte(strings.Repeat("x", maxCachedData))
	n := maxEventBytes/maxCachedData + 5
	for i := range n {
		c.Put(Event{ID: fmt.Sprint("evt_", i), Data: data})
	}
	if c.bytes > maxEventBytes || c.Len() != maxEventBytes/maxCachedData {
		t.Fatalf("the cache holds %d events, %d bytes; want at most %d bytes", c.Len(), c.bytes, maxEventBytes)
	}
}
