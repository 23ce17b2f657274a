package storagetest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// Controls of the events area and of transactions.

var burnsRolledBackSeqs = Control{
	Name:   "burns_rolled_back_seqs",
	Breaks: "the sequence numbers a rolled-back transaction took are lost, so the sequence has gaps",
	New: func() func(storage.Store) storage.Store {
		st := &seqBurner{offset: map[string]int64{}}
		return func(s storage.Store) storage.Store { return &burnsSeqs{Store: s, st: st} }
	},
}

type seqBurner struct {
	mu     sync.Mutex
	burned int64
	offset map[string]int64
}

type burnsSeqs struct {
	storage.Store
	st *seqBurner
}

func (s *burnsSeqs) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	t := &burnsSeqsTx{st: s.st, pending: map[string]int64{}}
	err := s.Store.WithTx(ctx, func(tx storage.Tx) error { t.Tx = tx; return fn(t) })
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	if err != nil {
		s.st.burned += t.inserted
	} else {
		for id, off := range t.pending {
			s.st.offset[id] = off
		}
	}
	return err
}

func (s *burnsSeqs) shift(e storage.Event) storage.Event {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	e.Seq += s.st.offset[e.ID]
	return e
}

func (s *burnsSeqs) GetEvent(ctx context.Context, id string) (storage.Event, error) {
	e, err := s.Store.GetEvent(ctx, id)
	return s.shift(e), err
}

func (s *burnsSeqs) ListEvents(ctx context.Context, p *storage.ListEventsParams) ([]storage.Event, error) {
	evs, err := s.Store.ListEvents(ctx, p)
	for i := range evs {
		evs[i] = s.shift(evs[i])
	}
	return evs, err
}

func (s *burnsSeqs) LastSeq(ctx context.Context) (int64, error) {
	last, err := s.Store.LastSeq(ctx)
	if err != nil || last == 0 {
		return last, err
	}
	e, err := s.Store.GetEventBySeq(ctx, last)
	return s.shift(e).Seq, err
}

type burnsSeqsTx struct {
	storage.Tx
	st       *seqBurner
	inserted int64
	pending  map[string]int64
}

func (t *burnsSeqsTx) InsertEvent(ctx context.Context, p *storage.InsertEventParams) (storage.Event, error) {
	e, err := t.Tx.InsertEvent(ctx, p)
	if err != nil {
		return e, err
	}
	t.inserted++
	t.st.mu.Lock()
	off := t.st.burned
	t.st.mu.Unlock()
	t.pending[e.ID] = off
	e.Seq += off
	return e, nil
}

var dropsEventActor = txControl("drops_event_actor", "an event is stored without its actor",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return dropsActorTx{tx} })

type dropsActorTx struct{ storage.Tx }

func (t dropsActorTx) InsertEvent(ctx context.Context, p *storage.InsertEventParams) (storage.Event, error) {
	q := *p
	q.Actor = ""
	return t.Tx.InsertEvent(ctx, &q)
}

var swallowsDuplicateEvents = txControl("swallows_duplicate_events", "a duplicate event id or delivery returns the earlier event instead of ErrDuplicate",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return swallowsEventsTx{tx} })

type swallowsEventsTx struct{ storage.Tx }

func (t swallowsEventsTx) InsertEvent(ctx context.Context, p *storage.InsertEventParams) (storage.Event, error) {
	e, err := t.Tx.InsertEvent(ctx, p)
	if !errors.Is(err, storage.ErrDuplicate) {
		return e, err
	}
	if prev, gerr := t.GetEvent(ctx, p.ID); gerr == nil {
		prev.Replayed = true
		return prev, nil
	}
	if prev, gerr := t.GetEventByDelivery(ctx, p.Source, p.DeliveryID); gerr == nil {
		prev.Replayed = true
		return prev, nil
	}
	return e, err
}

var dropsTakenFreshEvents = txControl("drops_taken_fresh_events", "a fresh event whose id is taken is dropped and the rest of its transaction commits",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return dropsFreshTx{tx} })

type dropsFreshTx struct{ storage.Tx }

func (t dropsFreshTx) InsertEvent(ctx context.Context, p *storage.InsertEventParams) (storage.Event, error) {
	if p.Fresh {
		if prev, err := t.GetEvent(ctx, p.ID); err == nil {
			return prev, nil
		}
	}
	return t.Tx.InsertEvent(ctx, p)
}

// eventsIgnoreUntilSeq lists events past the bound a paginated list
// captured.
var eventsIgnoreUntilSeq = stateless("events_ignore_until_seq", "ListEvents ignores UntilSeq",
	func(s storage.Store) storage.Store { return noUntilSeq{s} })

func listNoUntilSeq(ctx context.Context, r storage.Reader, p *storage.ListEventsParams) ([]storage.Event, error) {
	q := *p
	q.UntilSeq = 0
	return r.ListEvents(ctx, &q)
}

type noUntilSeq struct{ storage.Store }

func (s noUntilSeq) ListEvents(ctx context.Context, p *storage.ListEventsParams) ([]storage.Event, error) {
	return listNoUntilSeq(ctx, s.Store, p)
}

func (s noUntilSeq) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(noUntilSeqTx{tx}) })
}

type noUntilSeqTx struct{ storage.Tx }

func (t noUntilSeqTx) ListEvents(ctx context.Context, p *storage.ListEventsParams) ([]storage.Event, error) {
	return listNoUntilSeq(ctx, t.Tx, p)
}

var eventsIgnoreCorrelationFilter = stateless("events_ignore_correlation_filter", "ListEvents ignores the correlation key filter",
	func(s storage.Store) storage.Store { return noKeyFilter{s} })

func listNoKeyFilter(ctx context.Context, r storage.Reader, p *storage.ListEventsParams) ([]storage.Event, error) {
	q := *p
	q.CorrelationKey = ""
	return r.ListEvents(ctx, &q)
}

type noKeyFilter struct{ storage.Store }

func (s noKeyFilter) ListEvents(ctx context.Context, p *storage.ListEventsParams) ([]storage.Event, error) {
	return listNoKeyFilter(ctx, s.Store, p)
}

func (s noKeyFilter) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(noKeyFilterTx{tx}) })
}

type noKeyFilterTx struct{ storage.Tx }

func (t noKeyFilterTx) ListEvents(ctx context.Context, p *storage.ListEventsParams) ([]storage.Event, error) {
	return listNoKeyFilter(ctx, t.Tx, p)
}

var findIgnoresTypes = stateless("find_ignores_types", "FindEvent matches events of any type",
	func(s storage.Store) storage.Store { return anyTypeFind{s} })

func findAnyType(ctx context.Context, r storage.Reader, p *storage.FindEventParams) (storage.Event, error) {
	q := *p
	q.Types = nil
	return r.FindEvent(ctx, &q)
}

type anyTypeFind struct{ storage.Store }

func (s anyTypeFind) FindEvent(ctx context.Context, p *storage.FindEventParams) (storage.Event, error) {
	return findAnyType(ctx, s.Store, p)
}

func (s anyTypeFind) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx storage.Tx) error { return fn(anyTypeFindTx{tx}) })
}

type anyTypeFindTx struct{ storage.Tx }

func (t anyTypeFindTx) FindEvent(ctx context.Context, p *storage.FindEventParams) (storage.Event, error) {
	return findAnyType(ctx, t.Tx, p)
}

var unfencedCausalWindow = txControl("unfenced_causal_window", "UpdateCausalWindow moves the window whatever window the caller read",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return unfencedWindowTx{tx} })

type unfencedWindowTx struct{ storage.Tx }

func (t unfencedWindowTx) UpdateCausalWindow(ctx context.Context, p *storage.UpdateCausalWindowParams) error {
	if cur, err := t.GetCausalRoot(ctx, p.Root); err == nil {
		q := *p
		q.FromWindowStart, q.FromWindowCount = cur.WindowStart, cur.WindowCount
		p = &q
	}
	return t.Tx.UpdateCausalWindow(ctx, p)
}

var commitsFailedTx = stateless("commits_failed_tx", "WithTx commits what fn wrote even when fn fails",
	func(s storage.Store) storage.Store { return commitsAlways{s} })

type commitsAlways struct{ storage.Store }

func (s commitsAlways) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	var ferr error
	if err := s.Store.WithTx(context.WithoutCancel(ctx), func(tx storage.Tx) error { ferr = fn(tx); return nil }); err != nil {
		return err
	}
	return ferr
}

var txReadsCommitted = txControl("tx_reads_committed", "a transaction's reads do not see its own writes (they read what committed)",
	func(s storage.Store, tx storage.Tx) storage.Tx { return committedReadsTx{Tx: tx, s: s} })

type committedReadsTx struct {
	storage.Tx
	s storage.Store
}

func (t committedReadsTx) GetEvent(ctx context.Context, id string) (storage.Event, error) {
	return t.s.GetEvent(ctx, id)
}

func (t committedReadsTx) LastSeq(ctx context.Context) (int64, error) { return t.s.LastSeq(ctx) }

func (t committedReadsTx) GetWork(ctx context.Context, id string) (storage.Work, error) {
	return t.s.GetWork(ctx, id)
}

func (t committedReadsTx) GetCallGuard(ctx context.Context, id string) (storage.CallGuard, error) {
	return t.s.GetCallGuard(ctx, id)
}

// txKeepsFirstRead is a transaction that answers every read of a Work
// with what it read first, even after its own writes changed the row.
var txKeepsFirstRead = txControl("tx_keeps_first_read", "a transaction keeps the first read of a Work row across its own writes",
	func(s storage.Store, tx storage.Tx) storage.Tx {
		return &firstReadTx{Tx: tx, seen: map[string]storage.Work{}}
	})

type firstReadTx struct {
	storage.Tx
	seen map[string]storage.Work
}

func (t *firstReadTx) GetWork(ctx context.Context, id string) (storage.Work, error) {
	if w, ok := t.seen[id]; ok {
		return w, nil
	}
	w, err := t.Tx.GetWork(ctx, id)
	if err == nil {
		t.seen[id] = w
	}
	return w, err
}

func (t *firstReadTx) GetCallGuard(ctx context.Context, id string) (storage.CallGuard, error) {
	g, err := t.Tx.GetCallGuard(ctx, id)
	if err != nil {
		return g, err
	}
	if w, ok := t.seen[g.Work.ID]; ok {
		g.Work = w
	} else {
		t.seen[g.Work.ID] = g.Work
	}
	return g, nil
}

// txPoisonedByRefusal is a transaction that a refused statement aborts, as
// a PostgreSQL transaction without savepoints is.
var txPoisonedByRefusal = stateless("tx_poisoned_by_refusal", "after one method refuses, the transaction fails every later call and its commit",
	func(s storage.Store) storage.Store { return poisoning{s} })

var errAborted = errors.New("current transaction is aborted, commands ignored until end of transaction block")

type poisoning struct{ storage.Store }

func (s poisoning) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	return s.Store.WithTx(ctx, func(tx storage.Tx) error {
		t := &poisonTx{Tx: tx}
		if err := fn(t); err != nil {
			return err
		}
		if t.poisoned {
			return errAborted
		}
		return nil
	})
}

type poisonTx struct {
	storage.Tx
	poisoned bool
}

func poison[T any](t *poisonTx, call func() (T, error)) (T, error) {
	if t.poisoned {
		var zero T
		return zero, errAborted
	}
	v, err := call()
	if err != nil {
		t.poisoned = true
	}
	return v, err
}

func (t *poisonTx) InsertEvent(ctx context.Context, p *storage.InsertEventParams) (storage.Event, error) {
	return poison(t, func() (storage.Event, error) { return t.Tx.InsertEvent(ctx, p) })
}

func (t *poisonTx) InsertWork(ctx context.Context, p *storage.InsertWorkParams) (storage.Work, error) {
	return poison(t, func() (storage.Work, error) { return t.Tx.InsertWork(ctx, p) })
}

func (t *poisonTx) UpdateWork(ctx context.Context, p *storage.UpdateWorkParams) (storage.Work, error) {
	return poison(t, func() (storage.Work, error) { return t.Tx.UpdateWork(ctx, p) })
}

func (t *poisonTx) GetWork(ctx context.Context, id string) (storage.Work, error) {
	return poison(t, func() (storage.Work, error) { return t.Tx.GetWork(ctx, id) })
}

func (t *poisonTx) GetCallGuard(ctx context.Context, id string) (storage.CallGuard, error) {
	return poison(t, func() (storage.CallGuard, error) { return t.Tx.GetCallGuard(ctx, id) })
}

func (t *poisonTx) AcquireKey(ctx context.Context, p *storage.AcquireKeyParams) error {
	_, err := poison(t, func() (struct{}, error) { return struct{}{}, t.Tx.AcquireKey(ctx, p) })
	return err
}

func (t *poisonTx) GetKeyOwner(ctx context.Context, scope, key string) (storage.Work, error) {
	return poison(t, func() (storage.Work, error) { return t.Tx.GetKeyOwner(ctx, scope, key) })
}

// busyWhenContended refuses a transaction while another runs, as an engine
// that returns SQLITE_BUSY instead of waiting would.
var busyWhenContended = stateless("busy_when_contended", "WithTx fails while another transaction runs instead of waiting for it",
	func(s storage.Store) storage.Store { return &busy{Store: s} })

type busy struct {
	storage.Store
	mu sync.Mutex
}

func (s *busy) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	if !s.mu.TryLock() {
		return errors.New("database is locked (busy)")
	}
	defer s.mu.Unlock()
	return s.Store.WithTx(ctx, fn)
}

// forgetsEventsOnReopen hides, after a reopen, every event accepted
// before it: an event log kept in memory.
var forgetsEventsOnReopen = afterReopen("forgets_events_on_reopen", "events committed before a reopen are gone after it",
	func(s storage.Store) storage.Store {
		boundary, err := s.LastSeq(context.Background())
		if err != nil {
			panic(fmt.Sprintf("forgets_events_on_reopen: %v", err))
		}
		return forgetsEvents{Store: s, boundary: boundary}
	})

type forgetsEvents struct {
	storage.Store
	boundary int64
}

func (s forgetsEvents) GetEvent(ctx context.Context, id string) (storage.Event, error) {
	e, err := s.Store.GetEvent(ctx, id)
	if err == nil && e.Seq <= s.boundary {
		return storage.Event{}, fmt.Errorf("%w: event %s", storage.ErrNotFound, id)
	}
	return e, err
}

func (s forgetsEvents) ListEvents(ctx context.Context, p *storage.ListEventsParams) ([]storage.Event, error) {
	evs, err := s.Store.ListEvents(ctx, p)
	var out []storage.Event
	for _, e := range evs {
		if e.Seq > s.boundary {
			out = append(out, e)
		}
	}
	return out, err
}

var countsPastLimits = txControl("counts_past_limits", "CountCausal counts an event over its root's depth or rate limit",
	func(_ storage.Store, tx storage.Tx) storage.Tx { return pastLimitsTx{tx} })

type pastLimitsTx struct{ storage.Tx }

func (t pastLimitsTx) CountCausal(ctx context.Context, p *storage.CountCausalParams) (storage.CausalRoot, error) {
	cur, err := t.GetCausalRoot(ctx, p.Root)
	if err != nil {
		return cur, fmt.Errorf("%w: not pinned", storage.ErrFenced)
	}
	if err := t.UpdateCausalWindow(ctx, &storage.UpdateCausalWindowParams{
		Root: p.Root, FromWindowStart: cur.WindowStart, FromWindowCount: cur.WindowCount, WindowStart: cur.WindowStart, WindowCount: cur.WindowCount + 1,
	}); err != nil {
		return cur, err
	}
	return t.GetCausalRoot(ctx, p.Root)
}
