package storage

import "sync"

// EventCache keeps accepted events by id for the whole process, so that
// reading an event again (an emission's parent, a segment's input, the
// cause of a Work) costs no statement. An accepted event never changes and
// is never deleted, so an event that has committed stays true for good,
// on every daemon of a shared store: the cache is never invalidated, only
// bounded.
//
// Only committed events go in. A store puts the events a reader found
// outside a transaction, and, once a write transaction's batch has
// committed, the events that transaction kept (read or inserted): an
// event read inside a transaction may be an uncommitted insert of an
// earlier caller of the same batch, and must wait for that batch's
// commit. A reader that finds an event here finds one it would have read
// from the store, since no store reads at an older snapshot than the
// moment of the lookup.
//
// It holds at most maxEvents events and maxEventBytes of their data,
// dropping the oldest first; an event whose data is larger than
// maxCachedData is never kept. The zero value is not ready: use
// NewEventCache.
type EventCache struct {
	mu    sync.Mutex
	byID  map[string]Event
	order []string // ids in the order they went in, oldest at head
	head  int
	bytes int
}

const (
	maxEvents     = 4096
	maxEventBytes = 8 << 20
	maxCachedData = 64 << 10
)

// NewEventCache returns an empty cache.
func NewEventCache() *EventCache {
	return &EventCache{byID: map[string]Event{}}
}

// Get returns a copy of the event kept for id.
func (c *EventCache) Get(id string) (Event, bool) {
	c.mu.Lock()
	e, ok := c.byID[id]
	c.mu.Unlock()
	if !ok {
		return Event{}, false
	}
	return e.cloned(), true
}

// Put keeps a copy of e, an event that has committed.
func (c *EventCache) Put(e Event) {
	if e.ID == "" || len(e.Data) > maxCachedData {
		return
	}
	e = e.cloned()
	e.Replayed = false
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byID[e.ID]; ok {
		return
	}
	c.byID[e.ID] = e
	c.order = append(c.order, e.ID)
	c.bytes += len(e.Data)
	for len(c.byID) > maxEvents || c.bytes > maxEventBytes {
		old := c.order[c.head]
		c.order[c.head] = ""
		c.head++
		c.bytes -= len(c.byID[old].Data)
		delete(c.byID, old)
	}
	// Reclaim the dropped head once it is half the slice.
	if c.head > len(c.order)/2 {
		c.order = append(c.order[:0], c.order[c.head:]...)
		c.head = 0
	}
}

// Len is how many events the cache holds.
func (c *EventCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byID)
}

// Committed puts every event rows kept: rows belongs to a write
// transaction whose batch has just committed.
func (c *EventCache) Committed(rows *TxRows) {
	if c == nil || rows == nil {
		return
	}
	for _, e := range rows.events {
		c.Put(e)
	}
}

// Read is a reader's GetEvent through the cache: the kept event, else
// read's, kept when found. It is for reads outside a transaction, which
// only see committed events.
func (c *EventCache) Read(id string, read func() (Event, error)) (Event, error) {
	if e, ok := c.Get(id); ok {
		return e, nil
	}
	e, err := read()
	if err == nil {
		c.Put(e)
	}
	return e, err
}

// Lookup is a transaction's read of an event through the cache: the kept
// event, else read's, not kept (the transaction's events go in once its
// batch has committed; see Committed).
func (c *EventCache) Lookup(id string, read func() (Event, error)) (Event, error) {
	if e, ok := c.Get(id); ok {
		return e, nil
	}
	return read()
}
