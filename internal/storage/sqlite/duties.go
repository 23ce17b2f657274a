package sqlite

import (
	"context"
	"fmt"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// ---- duties ----

func (q queries) GetDutyLease(ctx context.Context, name string) (storage.DutyLease, error) {
	var d storage.DutyLease
	var expires, taken int64
	err := q.q.QueryRowContext(ctx, `SELECT name, owner, expires_at, taken_at FROM duty_leases WHERE name = ?`, name).Scan(&d.Name, &d.Owner, &expires, &taken)
	d.ExpiresAt, d.TakenAt = fromTS(expires), fromTS(taken)
	return d, one(err, "duty", name)
}

// TakeDuty is one upsert whose update applies only while the row is the
// owner's or expired: no row touched is a lease another owner holds.
func (t *tx) TakeDuty(ctx context.Context, p *storage.TakeDutyParams) (storage.DutyLease, error) {
	if p.Name == "" || p.Owner == "" {
		return storage.DutyLease{}, fmt.Errorf("sqlite: a duty lease needs a name and an owner")
	}
	res, err := t.q.ExecContext(ctx, `INSERT INTO duty_leases (name, owner, expires_at, taken_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at,
			taken_at = CASE WHEN duty_leases.owner = excluded.owner THEN duty_leases.taken_at ELSE excluded.taken_at END
		WHERE duty_leases.owner = excluded.owner OR duty_leases.expires_at <= ?`,
		p.Name, p.Owner, ts(p.ExpiresAt), ts(p.Now), ts(p.Now))
	if err != nil {
		return storage.DutyLease{}, writeErr(err, "take duty")
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return storage.DutyLease{}, fmt.Errorf("%w: duty %s is held by another owner", storage.ErrFenced, p.Name)
	}
	return t.GetDutyLease(ctx, p.Name)
}

func (t *tx) ReleaseDuty(ctx context.Context, p *storage.ReleaseDutyParams) error {
	res, err := t.q.ExecContext(ctx, `UPDATE duty_leases SET expires_at = ? WHERE name = ? AND owner = ? AND expires_at > ?`,
		ts(p.At), p.Name, p.Owner, ts(p.At))
	if err != nil {
		return writeErr(err, "release duty")
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("%w: duty %s is not held by its releaser", storage.ErrFenced, p.Name)
	}
	return nil
}
