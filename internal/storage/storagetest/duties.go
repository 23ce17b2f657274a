package storagetest

import (
	"context"
	"errors"
	"fmt"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// Duty leases: a store-wide duty is run by one holder at a time. A lease
// is taken and renewed by compare-and-set: another owner is refused while
// the holder's lease runs, takes it once it expired, and at once after the
// holder released it.

func dutyCases() []Case {
	return []Case{
		{Name: "duty_one_holder", Run: plain(dutyOneHolder), Control: dutyTakeIgnoresHolder},
		{Name: "duty_taken_over_after_expiry", Run: plain(dutyTakenOverAfterExpiry), Control: dutyNeverExpires},
		{Name: "duty_survives_reopen", Run: dutySurvivesReopen, Control: forgetsDutiesOnReopen},
	}
}

func takeDuty(ctx context.Context, s storage.Store, name, owner string, now, until int) (storage.DutyLease, error) {
	var d storage.DutyLease
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		d, err = tx.TakeDuty(ctx, &storage.TakeDutyParams{Name: name, Owner: owner, Now: at(now), ExpiresAt: at(until)})
		return err
	})
	return d, err
}

func releaseDuty(ctx context.Context, s storage.Store, name, owner string, now int) error {
	return s.WithTx(ctx, func(tx storage.Tx) error {
		return tx.ReleaseDuty(ctx, &storage.ReleaseDutyParams{Name: name, Owner: owner, At: at(now)})
	})
}

// dutyOneHolder: the first taker holds the duty; another owner is fenced
// while the lease runs (up to the instant before it expires), the holder
// renews it keeping when it took it, and another duty is independent.
func dutyOneHolder(ctx context.Context, s storage.Store) error {
	if _, err := s.GetDutyLease(ctx, "timers"); !errors.Is(err, storage.ErrNotFound) {
		return fmt.Errorf("a duty never taken: %v, want ErrNotFound", err)
	}
	a, err := takeDuty(ctx, s, "timers", "owner-a", 1, 30)
	if err != nil {
		return fmt.Errorf("first take: %w", err)
	}
	_, early := takeDuty(ctx, s, "timers", "owner-b", 2, 40)
	_, late := takeDuty(ctx, s, "timers", "owner-b", 29, 60)
	renewed, rerr := takeDuty(ctx, s, "timers", "owner-a", 20, 50)
	other, oerr := takeDuty(ctx, s, "sweep", "owner-b", 21, 51)
	got, err := s.GetDutyLease(ctx, "timers")
	return first(err, rerr, oerr,
		want(a.Name == "timers" && a.Owner == "owner-a" && a.ExpiresAt.Equal(at(30)) && a.TakenAt.Equal(at(1)), "the first take = %+v", a),
		wantErr(early, storage.ErrFenced, "another owner's take while the lease runs"),
		wantErr(late, storage.ErrFenced, "another owner's take just before the lease expires"),
		want(renewed.Owner == "owner-a" && renewed.ExpiresAt.Equal(at(50)) && renewed.TakenAt.Equal(at(1)), "the holder's renewal = %+v, want owner-a until 50s, taken at 1s", renewed),
		want(other.Owner == "owner-b", "another duty's take = %+v", other),
		want(got.Owner == "owner-a" && got.ExpiresAt.Equal(at(50)), "the lease read back = %+v", got),
	)
}

// dutyTakenOverAfterExpiry: once the holder's lease expired another owner
// takes the duty and the old holder's renewal is then fenced; a release
// by a non-holder is fenced and changes nothing, and the holder's release
// lets another owner take it at once.
func dutyTakenOverAfterExpiry(ctx context.Context, s storage.Store) error {
	if _, err := takeDuty(ctx, s, "recovery", "owner-a", 1, 30); err != nil {
		return err
	}
	b, berr := takeDuty(ctx, s, "recovery", "owner-b", 30, 60)
	_, stale := takeDuty(ctx, s, "recovery", "owner-a", 31, 61)
	wrongRelease := releaseDuty(ctx, s, "recovery", "owner-a", 32)
	_, stillHeld := takeDuty(ctx, s, "recovery", "owner-c", 33, 63)
	release := releaseDuty(ctx, s, "recovery", "owner-b", 34)
	c, cerr := takeDuty(ctx, s, "recovery", "owner-c", 35, 65)
	neverTaken := releaseDuty(ctx, s, "nothing", "owner-a", 35)
	return first(berr, release, cerr,
		want(b.Owner == "owner-b" && b.TakenAt.Equal(at(30)) && b.ExpiresAt.Equal(at(60)), "the take after expiry = %+v", b),
		wantErr(stale, storage.ErrFenced, "the old holder's renewal after another took the duty"),
		wantErr(wrongRelease, storage.ErrFenced, "a release by an owner that does not hold the duty"),
		wantErr(stillHeld, storage.ErrFenced, "a take after another owner's refused release"),
		want(c.Owner == "owner-c" && c.TakenAt.Equal(at(35)), "the take after the holder's release = %+v", c),
		wantErr(neverTaken, storage.ErrFenced, "the release of a duty never taken"),
	)
}

// dutySurvivesReopen: a duty's lease is in the store, not in the store
// object: after a reopen (a restarted daemon) another owner is still
// refused until the lease expires.
func dutySurvivesReopen(ctx context.Context, env *Env) error {
	if _, err := takeDuty(ctx, env.Store, "sweep", "owner-a", 1, 30); err != nil {
		return err
	}
	if err := env.Reopen(); err != nil {
		return err
	}
	_, err := takeDuty(ctx, env.Store, "sweep", "owner-b", 2, 40)
	d, gerr := env.Store.GetDutyLease(ctx, "sweep")
	return first(gerr,
		wantErr(err, storage.ErrFenced, "another owner's take after a reopen while the lease runs"),
		want(d.Owner == "owner-a" && d.ExpiresAt.Equal(at(30)), "the lease after a reopen = %+v", d),
	)
}
