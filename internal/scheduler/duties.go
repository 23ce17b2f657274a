package scheduler

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// The store-wide duties: work that must run on one daemon at a time when
// several share a store. Firing due timers (wait timeouts included) and
// recovering expired leases are the scheduler's; the sweeps of store rows
// (toolbelt records, Idempotency-Key history) are the daemon's. Sweeps of
// local files (run directories, workspaces) are no duty: each daemon
// sweeps its own.
const (
	DutyTimers   = "timers"
	DutyRecovery = "recovery"
	DutySweeps   = "sweeps"
)

// AllDuties lists every duty a daemon takes.
var AllDuties = []string{DutyTimers, DutyRecovery, DutySweeps}

// DutyGate says whether this daemon holds a duty now (Options.Duties).
type DutyGate interface {
	Held(name string) bool
}

// holds reports whether this scheduler runs duty now: always without a
// gate (one scheduler on its own store).
func (s *Scheduler) holds(duty string) bool {
	return s.o.Duties == nil || s.o.Duties.Held(duty)
}

// Duties takes and renews the duty leases of one daemon (storage's
// duty_leases) and answers whether it holds each one now. The lease's
// owner is the node, not the daemon instance: a daemon that restarts on
// the same state directory (the lock proves the earlier one dead) renews
// its node's leases at once instead of waiting for them to expire, and a
// daemon of another node takes them over once they expire. Expiry is
// decided on the injected clock; a duty is trusted until a margin before
// its lease expires, so a holder whose renewals stall stops running it
// before another daemon may take it.
type Duties struct {
	store  storage.Store
	owner  string
	clock  clock.Clock
	margin time.Duration

	mu sync.Mutex
	// trusted is, per duty held, the instant up to which it is run.
	trusted map[string]time.Time
}

// NewDuties returns the duties of owner (the node id) on store. margin is
// how long before expiry a lease stops being trusted (at most a third of
// the lease given to Renew).
func NewDuties(store storage.Store, owner string, c clock.Clock, margin time.Duration) *Duties {
	return &Duties{store: store, owner: owner, clock: c, margin: margin, trusted: map[string]time.Time{}}
}

// Renew takes or renews every duty for lease from now, in one
// transaction, and returns the duties it holds afterwards. A duty another
// daemon holds is not an error; a failed write is, and then no duty is
// trusted until the next Renew.
func (d *Duties) Renew(ctx context.Context, lease time.Duration) ([]string, error) {
	margin := min(d.margin, lease/3)
	now := d.clock.Now()
	taken := map[string]time.Time{}
	err := d.store.WithTx(ctx, func(tx storage.Tx) error {
		clear(taken)
		for _, name := range AllDuties {
			l, err := tx.TakeDuty(ctx, &storage.TakeDutyParams{Name: name, Owner: d.owner, Now: now, ExpiresAt: now.Add(lease)})
			switch {
			case err == nil:
				taken[name] = l.ExpiresAt
			case !errors.Is(err, storage.ErrFenced):
				return err
			}
		}
		return nil
	})
	if err != nil {
		clear(taken)
	}
	var held []string
	d.mu.Lock()
	clear(d.trusted)
	for _, name := range AllDuties {
		if exp, ok := taken[name]; ok {
			d.trusted[name] = exp.Add(-margin)
			held = append(held, name)
		}
	}
	d.mu.Unlock()
	return held, err
}

// Held reports whether the daemon holds duty name now, with its lease
// valid for at least the margin.
func (d *Duties) Held(name string) bool {
	d.mu.Lock()
	until, ok := d.trusted[name]
	d.mu.Unlock()
	return ok && d.clock.Now().Before(until)
}

// Release gives up every duty held, so another daemon takes them at once
// (the daemon calls it when it stops).
func (d *Duties) Release(ctx context.Context) error {
	d.mu.Lock()
	names := make([]string, 0, len(d.trusted))
	for n := range d.trusted {
		names = append(names, n)
	}
	d.trusted = map[string]time.Time{}
	d.mu.Unlock()
	if len(names) == 0 {
		return nil
	}
	at := d.clock.Now()
	return d.store.WithTx(ctx, func(tx storage.Tx) error {
		for _, name := range names {
			err := tx.ReleaseDuty(ctx, &storage.ReleaseDutyParams{Name: name, Owner: d.owner, At: at})
			if err != nil && !errors.Is(err, storage.ErrFenced) {
				return err
			}
		}
		return nil
	})
}
