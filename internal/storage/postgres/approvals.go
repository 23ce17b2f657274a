package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// Approvals (in migration 0001, as SQLite's 0070).

var (
	_ storage.ApprovalReader = queries{}
	_ storage.ApprovalTx     = (*tx)(nil)
)

const approvalCols = `id, scope, work, binding, kind, operation, input_hash, state, actor, note, created_at, expires_at, decided_at, consumed_at`

func scanApproval(r scanner) (storage.Approval, error) {
	var a storage.Approval
	var created, expires, decided, consumed int64
	err := r.Scan(&a.ID, &a.Scope, &a.Work, &a.Binding, &a.Kind, &a.Operation, &a.InputHash, &a.State, &a.Actor, &a.Note,
		&created, &expires, &decided, &consumed)
	a.CreatedAt, a.ExpiresAt, a.DecidedAt, a.ConsumedAt = fromTS(created), fromTS(expires), fromTS(decided), fromTS(consumed)
	return a, err
}

func (q queries) GetApproval(ctx context.Context, id string) (storage.Approval, error) {
	a, err := scanApproval(q.q.queryRow(ctx, `SELECT `+approvalCols+` FROM approvals WHERE id = ?`, id))
	return a, one(err, "approval", id)
}

func (q queries) GetOpenApproval(ctx context.Context, k storage.ApprovalKey) (storage.Approval, error) {
	a, err := scanApproval(q.q.queryRow(ctx, `SELECT `+approvalCols+` FROM approvals
		WHERE work = ? AND kind = ? AND operation = ? AND input_hash = ? AND consumed_at = 0`, k.Work, k.Kind, k.Operation, k.InputHash))
	return a, one(err, "open approval of Work", k.Work)
}

func (q queries) ListApprovals(ctx context.Context, p *storage.ListApprovalsParams) ([]storage.Approval, error) {
	var w where
	w.eq("scope", p.Scope)
	w.eq("work", p.Work)
	w.eq("state", p.State)
	tail := w.page(p.Page)
	rows, err := q.q.query(ctx, `SELECT `+approvalCols+` FROM approvals`+w.sql()+tail, w.args...)
	out, err := collect(rows, err, scanApproval)
	if out == nil && err == nil {
		out = []storage.Approval{}
	}
	return out, err
}

func (t *tx) InsertApproval(ctx context.Context, a *storage.Approval) error {
	if a.ID == "" || a.Scope == "" || a.Work == "" || a.Kind == "" || a.State == "" {
		return fmt.Errorf("postgres: an approval needs an id, a scope, a Work, a kind and a state")
	}
	ok, err := t.insert(ctx, "insert approval", `INSERT INTO approvals (`+approvalCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		a.ID, a.Scope, a.Work, a.Binding, a.Kind, a.Operation, a.InputHash, a.State, a.Actor, a.Note,
		ts(a.CreatedAt), ts(a.ExpiresAt), ts(a.DecidedAt), ts(a.ConsumedAt))
	if err != nil || ok {
		return err
	}
	if dup, err := t.exists(ctx, `SELECT 1 FROM approvals WHERE id = ?`, a.ID); err != nil {
		return err
	} else if dup {
		return fmt.Errorf("%w: approval %s exists", storage.ErrDuplicate, a.ID)
	}
	return fmt.Errorf("%w: Work %s already has an open approval of this call", storage.ErrDuplicate, a.Work)
}

func (t *tx) DecideApproval(ctx context.Context, p *storage.DecideApprovalParams) (storage.Approval, error) {
	switch p.State {
	case storage.ApprovalApproved, storage.ApprovalDenied, storage.ApprovalExpired:
	default:
		return storage.Approval{}, fmt.Errorf("postgres: an approval is decided approved, denied or expired")
	}
	tag, err := t.q.exec(ctx, `UPDATE approvals SET state = ?, actor = ?, note = ?, decided_at = ? WHERE id = ? AND state = ?`,
		p.State, p.Actor, p.Note, ts(p.At), p.ID, storage.ApprovalPending)
	if err != nil {
		return storage.Approval{}, writeErr(err, "decide approval")
	}
	if err := t.fenced(ctx, "approvals", p.ID, tag.RowsAffected(), "approval"); err != nil {
		return storage.Approval{}, err
	}
	return t.GetApproval(ctx, p.ID)
}

func (t *tx) ConsumeApproval(ctx context.Context, id string, at time.Time) (storage.Approval, error) {
	tag, err := t.q.exec(ctx, `UPDATE approvals SET consumed_at = ? WHERE id = ? AND consumed_at = 0`, ts(at), id)
	if err != nil {
		return storage.Approval{}, writeErr(err, "consume approval")
	}
	if err := t.fenced(ctx, "approvals", id, tag.RowsAffected(), "approval"); err != nil {
		return storage.Approval{}, err
	}
	return t.GetApproval(ctx, id)
}
