package postgres

import (
	"context"
	"fmt"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// The toolbelt's records: tokens (digest only), request records for replay,
// and call records; a sensitive operation's request record keeps no
// result (withheld). All in migration 0001 (SQLite's 0020 and 0040).

var (
	_ storage.ToolbeltReader = queries{}
	_ storage.ToolbeltTx     = (*tx)(nil)
)

const tokenCols = `id, digest, execution, scope, work, binding, generation, epoch, operations, issued_at, expires_at, revoked_at`

func scanToken(r scanner) (storage.Token, error) {
	var t storage.Token
	var ops string
	var issued, expires, revoked int64
	if err := r.Scan(&t.ID, &t.Digest, &t.Execution, &t.Scope, &t.Work, &t.Binding, &t.Generation, &t.Epoch, &ops, &issued, &expires, &revoked); err != nil {
		return t, err
	}
	var err error
	if t.Operations, err = parseList(ops); err != nil {
		return t, err
	}
	t.IssuedAt, t.ExpiresAt, t.RevokedAt = fromTS(issued), fromTS(expires), fromTS(revoked)
	return t, nil
}

func (q queries) GetTokenByDigest(ctx context.Context, digest []byte) (storage.Token, error) {
	t, err := scanToken(q.q.queryRow(ctx, `SELECT `+tokenCols+` FROM toolbelt_tokens WHERE digest = ?`, digest))
	// Never name the digest in an error.
	return t, one(err, "token", "with that digest")
}

func (q queries) GetToken(ctx context.Context, id string) (storage.Token, error) {
	t, err := scanToken(q.q.queryRow(ctx, `SELECT `+tokenCols+` FROM toolbelt_tokens WHERE id = ?`, id))
	return t, one(err, "token", id)
}

func (q queries) ListExecutionTokens(ctx context.Context, executionID string) ([]storage.Token, error) {
	rows, err := q.q.query(ctx, `SELECT `+tokenCols+` FROM toolbelt_tokens WHERE execution = ? ORDER BY epoch, id`, executionID)
	return collect(rows, err, scanToken)
}

const replayCols = `execution, request_id, operation, input_hash, state, result, error_code, error_message, withheld, created_at, updated_at`

func scanReplay(r scanner) (storage.Replay, error) {
	var p storage.Replay
	var result *string
	var created, updated int64
	if err := r.Scan(&p.Execution, &p.RequestID, &p.Operation, &p.InputHash, &p.State, &result, &p.ErrorCode, &p.ErrorMessage, &p.Withheld, &created, &updated); err != nil {
		return p, err
	}
	if result != nil {
		p.Result = []byte(*result)
	}
	p.CreatedAt, p.UpdatedAt = fromTS(created), fromTS(updated)
	return p, nil
}

func (q queries) GetReplay(ctx context.Context, executionID, requestID string) (storage.Replay, error) {
	p, err := scanReplay(q.q.queryRow(ctx, `SELECT `+replayCols+` FROM toolbelt_replays WHERE execution = ? AND request_id = ?`, executionID, requestID))
	return p, one(err, "request record", requestID)
}

const callCols = `id, kind, operation, execution, epoch, token_id, result, gate, refusal, replayed, created_at`

func scanCall(r scanner) (storage.ToolbeltCall, error) {
	var c storage.ToolbeltCall
	var at int64
	if err := r.Scan(&c.ID, &c.Kind, &c.Operation, &c.Execution, &c.Epoch, &c.Token, &c.Result, &c.Gate, &c.Refusal, &c.Replayed, &at); err != nil {
		return c, err
	}
	c.At = fromTS(at)
	return c, nil
}

func (q queries) ListToolbeltCalls(ctx context.Context, p *storage.ListToolbeltCallsParams) ([]storage.ToolbeltCall, error) {
	var w where
	w.eq("execution", p.Execution)
	w.eq("kind", p.Kind)
	w.eq("result", p.Result)
	tail := w.page(p.Page)
	rows, err := q.q.query(ctx, `SELECT `+callCols+` FROM toolbelt_calls`+w.sql()+tail, w.args...)
	return collect(rows, err, scanCall)
}

func (t *tx) InsertToken(ctx context.Context, tok *storage.Token) error {
	if tok.ID == "" || len(tok.Digest) == 0 || tok.Execution == "" {
		return fmt.Errorf("postgres: a token needs an id, a digest and an execution")
	}
	ok, err := t.insert(ctx, "insert token", `INSERT INTO toolbelt_tokens (`+tokenCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		tok.ID, tok.Digest, tok.Execution, tok.Scope, tok.Work, tok.Binding, tok.Generation, tok.Epoch, jsonList(tok.Operations),
		ts(tok.IssuedAt), ts(tok.ExpiresAt), ts(tok.RevokedAt))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: token %s exists", storage.ErrDuplicate, tok.ID)
	}
	return nil
}

func (t *tx) RevokeTokens(ctx context.Context, p *storage.RevokeTokensParams) (int, error) {
	if p.At.IsZero() {
		// A zero time is stored as "not revoked": the tokens would stay live.
		return 0, fmt.Errorf("postgres: revoking tokens needs the time of the revocation")
	}
	var w where
	w.add("revoked_at = 0")
	switch {
	case p.ID != "":
		w.add("id = ?", p.ID)
	case p.Execution != "":
		if t.q.turn.rows.NoLiveTokens(p.Execution) {
			// The transaction's guard read found none to revoke.
			return 0, nil
		}
		w.add("execution = ?", p.Execution)
		if p.BelowEpoch > 0 {
			w.add("epoch < ?", p.BelowEpoch)
		}
	default:
		return 0, fmt.Errorf("postgres: revoke tokens needs an id or an execution")
	}
	query, args := `UPDATE toolbelt_tokens SET revoked_at = ?`+w.sql(), append([]any{ts(p.At)}, w.args...)
	if p.Uncounted {
		// Most finished executions had no token at all: the statement
		// travels with the next one instead of costing a round trip.
		return 0, t.q.later(ctx, query, args...)
	}
	tag, err := t.q.exec(ctx, query, args...)
	if err != nil {
		return 0, writeErr(err, "revoke tokens")
	}
	return int(tag.RowsAffected()), nil
}

// withheldCarries refuses a withheld record that carries a result or a
// refusal: a sensitive operation's answer never reaches storage.
func withheldCarries(r *storage.Replay) error {
	if r.Withheld && (r.Result != nil || r.ErrorCode != "" || r.ErrorMessage != "") {
		return fmt.Errorf("postgres: request %s is withheld (a sensitive operation) and may not carry a result or a refusal", r.RequestID)
	}
	return nil
}

func (t *tx) InsertReplay(ctx context.Context, r *storage.Replay) error {
	if err := withheldCarries(r); err != nil {
		return err
	}
	ok, err := t.insert(ctx, "insert request record", `INSERT INTO toolbelt_replays (`+replayCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.Execution, r.RequestID, r.Operation, r.InputHash, string(r.State), resultText(r.Result), r.ErrorCode, r.ErrorMessage, r.Withheld, ts(r.CreatedAt), ts(r.UpdatedAt))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: request %s is recorded", storage.ErrDuplicate, r.RequestID)
	}
	return nil
}

// resultText is a request record's result column: NULL for none.
func resultText(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

func (t *tx) FinishReplay(ctx context.Context, r *storage.Replay) error {
	if err := withheldCarries(r); err != nil {
		return err
	}
	tag, err := t.q.exec(ctx, `UPDATE toolbelt_replays SET state = 'done', result = ?, error_code = ?, error_message = ?, withheld = ?, updated_at = ?
		WHERE execution = ? AND request_id = ? AND state = 'claimed'`,
		resultText(r.Result), r.ErrorCode, r.ErrorMessage, r.Withheld, ts(r.UpdatedAt), r.Execution, r.RequestID)
	if err != nil {
		return writeErr(err, "finish request record")
	}
	if n := tag.RowsAffected(); n != 1 {
		return fmt.Errorf("%w: request %s is not claimed", storage.ErrFenced, r.RequestID)
	}
	return nil
}

func (t *tx) DeleteReplay(ctx context.Context, executionID, requestID string) error {
	tag, err := t.q.exec(ctx, `DELETE FROM toolbelt_replays WHERE execution = ? AND request_id = ? AND state = 'claimed'`, executionID, requestID)
	if err != nil {
		return writeErr(err, "delete request record")
	}
	if n := tag.RowsAffected(); n != 1 {
		return fmt.Errorf("%w: request %s is not claimed", storage.ErrFenced, requestID)
	}
	return nil
}

func (t *tx) InsertToolbeltCall(ctx context.Context, c *storage.ToolbeltCall) error {
	if c.Kind != storage.ToolbeltCalled && c.Kind != storage.ToolbeltRejected {
		return fmt.Errorf("postgres: call record kind %q is not known", c.Kind)
	}
	ok, err := t.insert(ctx, "insert call record", `INSERT INTO toolbelt_calls (`+callCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		c.ID, c.Kind, c.Operation, c.Execution, c.Epoch, c.Token, c.Result, c.Gate, c.Refusal, c.Replayed, ts(c.At))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: call record %s exists", storage.ErrDuplicate, c.ID)
	}
	return nil
}

func (t *tx) SweepToolbelt(ctx context.Context, p *storage.SweepToolbeltParams) (storage.SweepToolbeltResult, error) {
	var out storage.SweepToolbeltResult
	exec := func(query string, args ...any) (int, error) {
		tag, err := t.q.exec(ctx, query, args...)
		if err != nil {
			return 0, writeErr(err, "sweep toolbelt records")
		}
		return int(tag.RowsAffected()), nil
	}
	var err error
	if !p.TokensBefore.IsZero() {
		cut := ts(p.TokensBefore)
		if out.Tokens, err = exec(`DELETE FROM toolbelt_tokens WHERE (revoked_at <> 0 AND revoked_at <= ?) OR expires_at <= ?`, cut, cut); err != nil {
			return out, err
		}
	}
	if !p.ReplaysBefore.IsZero() {
		if out.Replays, err = exec(`DELETE FROM toolbelt_replays WHERE created_at <= ? AND execution <> ''
			AND execution IN (SELECT id FROM executions WHERE state = 'finished')`, ts(p.ReplaysBefore)); err != nil {
			return out, err
		}
	}
	if !p.CallsBefore.IsZero() {
		if out.Calls, err = exec(`DELETE FROM toolbelt_calls WHERE created_at <= ?`, ts(p.CallsBefore)); err != nil {
			return out, err
		}
	}
	if !p.EgressBefore.IsZero() {
		if out.Egress, err = exec(`DELETE FROM egress_connections WHERE ended_at <> 0 AND ended_at <= ?`, ts(p.EgressBefore)); err != nil {
			return out, err
		}
	}
	return out, nil
}
