package storage

import (
	"context"
	"time"
)

// DutyLease says who runs one store-wide duty (firing due timers,
// recovering expired leases, a sweep of store rows) until when. Several
// daemons on one store each try to take every duty; only the holder of a
// duty's unexpired lease runs it, so the duty runs on one daemon at a time,
// and when its holder dies the lease expires and another daemon takes it.
type DutyLease struct {
	Name  string
	Owner string
	// ExpiresAt is exclusive: the lease is free at ExpiresAt.
	ExpiresAt time.Time
	// TakenAt is when Owner took the lease (a renewal keeps it).
	TakenAt time.Time
}

// TakeDutyParams takes or renews a duty's lease.
type TakeDutyParams struct {
	Name  string
	Owner string
	// Now decides expiry: a lease of another owner that expires at or
	// before Now is free.
	Now       time.Time
	ExpiresAt time.Time
}

// ReleaseDutyParams gives up a duty's lease.
type ReleaseDutyParams struct {
	Name  string
	Owner string
	At    time.Time
}

// DutyReader holds the duties' queries.
type DutyReader interface {
	// GetDutyLease returns the duty's lease as last written (expired or
	// not), or ErrNotFound when nobody ever took it.
	GetDutyLease(ctx context.Context, name string) (DutyLease, error)
}

// DutyTx holds the duties' writes, each one compare-and-set.
type DutyTx interface {
	// TakeDuty makes Owner the holder of the duty until ExpiresAt when
	// nobody holds it, Owner holds it already (a renewal, which keeps
	// TakenAt, even of a lease that lapsed unseen), or its holder's lease
	// expired by Now. ErrFenced when another owner holds it past Now:
	// nothing is written.
	TakeDuty(ctx context.Context, p *TakeDutyParams) (DutyLease, error)
	// ReleaseDuty ends Owner's lease of the duty at At, so another owner
	// may take it at once; ErrFenced when Owner does not hold it (another
	// took it, or it was never taken).
	ReleaseDuty(ctx context.Context, p *ReleaseDutyParams) error
}
