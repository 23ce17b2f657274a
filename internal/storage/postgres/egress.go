package postgres

import (
	"context"
	"fmt"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// Egress connection records (in migration 0001, as SQLite's 0080).

var (
	_ storage.EgressReader = queries{}
	_ storage.EgressTx     = (*tx)(nil)
)

const egressCols = `id, execution, host, port, allowed, reason, bytes_up, bytes_down, created_at, ended_at`

func scanEgress(r scanner) (storage.EgressConnection, error) {
	var c storage.EgressConnection
	var started, ended int64
	err := r.Scan(&c.ID, &c.Execution, &c.Host, &c.Port, &c.Allowed, &c.Reason, &c.BytesUp, &c.BytesDown, &started, &ended)
	c.StartedAt, c.EndedAt = fromTS(started), fromTS(ended)
	return c, err
}

func (q queries) ListEgressConnections(ctx context.Context, p *storage.ListEgressParams) ([]storage.EgressConnection, error) {
	var w where
	w.eq("execution", p.Execution)
	tail := w.page(p.Page)
	rows, err := q.q.query(ctx, `SELECT `+egressCols+` FROM egress_connections`+w.sql()+tail, w.args...)
	return collect(rows, err, scanEgress)
}

func (t *tx) InsertEgressConnection(ctx context.Context, c *storage.EgressConnection) error {
	if c.ID == "" || c.Execution == "" || c.StartedAt.IsZero() {
		return fmt.Errorf("postgres: an egress record needs an id, an execution and its start")
	}
	ok, err := t.insert(ctx, "insert egress record", `INSERT INTO egress_connections (`+egressCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		c.ID, c.Execution, c.Host, c.Port, c.Allowed, c.Reason, c.BytesUp, c.BytesDown, ts(c.StartedAt), ts(c.EndedAt))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: egress record %s exists", storage.ErrDuplicate, c.ID)
	}
	return nil
}

func (t *tx) FinishEgressConnection(ctx context.Context, p *storage.FinishEgressParams) error {
	if p.EndedAt.IsZero() {
		// A zero time is stored as "open": the record would never end.
		return fmt.Errorf("postgres: finishing an egress record needs the time it ended")
	}
	tag, err := t.q.exec(ctx, `UPDATE egress_connections SET reason = ?, bytes_up = ?, bytes_down = ?, ended_at = ?
		WHERE id = ? AND ended_at = 0`, p.Reason, p.BytesUp, p.BytesDown, ts(p.EndedAt), p.ID)
	if err != nil {
		return writeErr(err, "finish egress record")
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	if found, err := t.exists(ctx, `SELECT 1 FROM egress_connections WHERE id = ?`, p.ID); err != nil {
		return err
	} else if !found {
		return fmt.Errorf("%w: egress record %s", storage.ErrNotFound, p.ID)
	}
	return fmt.Errorf("%w: egress record %s has ended", storage.ErrFenced, p.ID)
}
