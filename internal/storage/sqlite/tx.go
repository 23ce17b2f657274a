package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// exists reports whether query returns a row.
func (t *tx) exists(ctx context.Context, query string, args ...any) (bool, error) {
	var one int
	err := t.q.QueryRowContext(ctx, query, args...).Scan(&one)
	if err != nil {
		if errors.Is(err, errNoRows) {
			return false, nil
		}
		return false, fmt.Errorf("sqlite: check: %w", err)
	}
	return true, nil
}

// fenced turns a compare-and-set that touched no row into ErrFenced (or
// ErrNotFound when the row does not exist at all).
func (t *tx) fenced(ctx context.Context, table, id string, n int64, what string) error {
	if n == 1 {
		return nil
	}
	ok, err := t.exists(ctx, `SELECT 1 FROM `+table+` WHERE id = ?`, id)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %s %s", storage.ErrNotFound, what, id)
	}
	return fmt.Errorf("%w: %s %s has moved on", storage.ErrFenced, what, id)
}

// writeWork runs query, an UPDATE of one work row (or an INSERT … ON
// CONFLICT DO NOTHING), with RETURNING its columns, and keeps the row it
// wrote: no read after the write. No row: the compare-and-set found
// nothing to change (fenced), or the row does not exist.
func (t *tx) writeWork(ctx context.Context, what, id, query string, args ...any) (storage.Work, error) {
	w, err := scanWork(t.q.QueryRowContext(ctx, query+` RETURNING `+workCols, args...))
	if errors.Is(err, errNoRows) {
		return storage.Work{}, t.fenced(ctx, "work", id, 0, "work")
	}
	if err != nil {
		return storage.Work{}, writeErr(err, what)
	}
	t.rows.KeepWork(w)
	return w, nil
}

// writeExecution is writeWork for one execution row.
func (t *tx) writeExecution(ctx context.Context, what, id, query string, args ...any) (storage.Execution, error) {
	e, err := scanExecution(t.q.QueryRowContext(ctx, query+` RETURNING `+execCols, args...))
	if errors.Is(err, errNoRows) {
		return storage.Execution{}, t.fenced(ctx, "executions", id, 0, "execution")
	}
	if err != nil {
		return storage.Execution{}, writeErr(err, what)
	}
	t.rows.KeepExecution(e)
	return e, nil
}

// ---- events ----

func (t *tx) InsertEvent(ctx context.Context, p *storage.InsertEventParams) (storage.Event, error) {
	if p.ID == "" || p.Root == "" {
		return storage.Event{}, errors.New("sqlite: an event needs an id and a root")
	}
	data := p.Data
	if len(data) == 0 {
		data = json.RawMessage(`{}`)
	}
	// The sequence is the next number after the highest one, inside the
	// single writer's transaction: gap-free and in commit order. In a
	// batch, a caller rolled back to its savepoint takes its numbers back
	// before the next caller allocates. An id or a delivery already
	// accepted inserts nothing (ON CONFLICT DO NOTHING, on the unique
	// id and events_delivery), and only then is it asked which: one
	// statement for the event that is new.
	var seq int64
	err := t.q.QueryRowContext(ctx, `INSERT INTO events (seq, id, type, source, scope, work, execution, correlation_key, data, parent, root, depth, actor, delivery_id, accepted_at)
		VALUES ((SELECT COALESCE(MAX(seq), 0) + 1 FROM events), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING seq`,
		p.ID, p.Type, p.Source, p.Scope, p.Work, p.Execution, p.CorrelationKey, string(data), nullStr(p.Parent), p.Root, p.Depth,
		p.Actor, p.DeliveryID, ts(p.AcceptedAt)).Scan(&seq)
	if errors.Is(err, errNoRows) {
		return storage.Event{}, t.eventTaken(ctx, p)
	}
	if err != nil {
		return storage.Event{}, writeErr(err, "insert event")
	}
	e := storage.Event{
		Seq: seq, ID: p.ID, Type: p.Type, Source: p.Source, Scope: p.Scope, Work: p.Work, Execution: p.Execution,
		CorrelationKey: p.CorrelationKey, Data: data, Parent: p.Parent, Root: p.Root, Depth: p.Depth, Actor: p.Actor,
		DeliveryID: p.DeliveryID, AcceptedAt: fromTS(ts(p.AcceptedAt)),
	}
	t.rows.KeepEvent(e)
	return e, nil
}

// eventTaken says which identity of an event its insert found taken: the
// id, else the source's delivery.
func (t *tx) eventTaken(ctx context.Context, p *storage.InsertEventParams) error {
	dup, err := t.exists(ctx, `SELECT 1 FROM events WHERE id = ?`, p.ID)
	switch {
	case err != nil:
		return err
	case dup:
		return fmt.Errorf("%w: event %s exists", storage.ErrDuplicate, p.ID)
	case p.DeliveryID != "":
		return fmt.Errorf("%w: delivery %s of source %s was accepted", storage.ErrDuplicate, p.DeliveryID, p.Source)
	}
	return errors.New("sqlite: insert event: the event sequence's next number is taken; check the events table")
}

func (t *tx) InsertCausalRoot(ctx context.Context, r *storage.CausalRoot) error {
	if dup, err := t.exists(ctx, `SELECT 1 FROM causal_roots WHERE root = ?`, r.Root); err != nil {
		return err
	} else if dup {
		return fmt.Errorf("%w: causal root %s is pinned", storage.ErrDuplicate, r.Root)
	}
	_, err := t.q.ExecContext(ctx, `INSERT INTO causal_roots (root, max_depth, per_minute, window_start, window_count, pinned_at) VALUES (?, ?, ?, ?, ?, ?)`,
		r.Root, r.MaxDepth, r.PerMinute, ts(r.WindowStart), r.WindowCount, ts(r.PinnedAt))
	return writeErr(err, "pin causal root")
}

// CountCausal is the window's arithmetic of the kernel's
// AcceptDerivedInTx in one UPDATE: the window restarts when a minute
// (in nanoseconds, as times are stored) has passed or the clock went
// back, and the count is refused at per_minute.
func (t *tx) CountCausal(ctx context.Context, p *storage.CountCausalParams) (storage.CausalRoot, error) {
	now, minute := ts(p.Now), time.Minute.Nanoseconds()
	var r storage.CausalRoot
	var ws, pa int64
	err := t.q.QueryRowContext(ctx, `UPDATE causal_roots SET
			window_start = CASE WHEN ? - window_start >= ? OR ? < window_start THEN ? ELSE window_start END,
			window_count = CASE WHEN ? - window_start >= ? OR ? < window_start THEN 1 ELSE window_count + 1 END
		WHERE root = ? AND max_depth >= ?
		  AND (CASE WHEN ? - window_start >= ? OR ? < window_start THEN 0 ELSE window_count END) < per_minute
		RETURNING root, max_depth, per_minute, window_start, window_count, pinned_at`,
		now, minute, now, now, now, minute, now, p.Root, p.Depth, now, minute, now).
		Scan(&r.Root, &r.MaxDepth, &r.PerMinute, &ws, &r.WindowCount, &pa)
	if errors.Is(err, errNoRows) {
		return storage.CausalRoot{}, fmt.Errorf("%w: causal root %s is not pinned or the event is over its limits", storage.ErrFenced, p.Root)
	}
	if err != nil {
		return storage.CausalRoot{}, writeErr(err, "count causal window")
	}
	r.WindowStart, r.PinnedAt = fromTS(ws), fromTS(pa)
	return r, nil
}

func (t *tx) UpdateCausalWindow(ctx context.Context, p *storage.UpdateCausalWindowParams) error {
	res, err := t.q.ExecContext(ctx, `UPDATE causal_roots SET window_start = ?, window_count = ?
		WHERE root = ? AND window_start = ? AND window_count = ?`,
		ts(p.WindowStart), p.WindowCount, p.Root, ts(p.FromWindowStart), p.FromWindowCount)
	if err != nil {
		return writeErr(err, "update causal window")
	}
	n, _ := res.RowsAffected()
	if n != 1 {
		return fmt.Errorf("%w: causal window of %s has moved on", storage.ErrFenced, p.Root)
	}
	return nil
}

// ---- work ----

func (t *tx) InsertWork(ctx context.Context, p *storage.InsertWorkParams) (storage.Work, error) {
	if !p.State.Valid() {
		return storage.Work{}, fmt.Errorf("sqlite: work state %q is not valid", p.State)
	}
	var count int64
	if p.Input != "" {
		count = 1
	}
	w, err := scanWork(t.q.QueryRowContext(ctx, `INSERT INTO work (id, scope, binding, state, parent, created_event, grants, input_count, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING `+workCols,
		p.ID, p.Scope, p.Binding, string(p.State), nullStr(p.Parent), p.CreatedEvent, jsonList(p.Grants), count, ts(p.CreatedAt), ts(p.CreatedAt)))
	if errors.Is(err, errNoRows) {
		return storage.Work{}, fmt.Errorf("%w: work %s exists", storage.ErrDuplicate, p.ID)
	}
	if err != nil {
		return storage.Work{}, writeErr(err, "insert work")
	}
	if p.Input != "" {
		// A new Work has no inputs: its first is position 1, written
		// without reading or counting anything.
		if _, err := t.q.ExecContext(ctx, `INSERT INTO work_inputs (work, position, event, queued_at) VALUES (?, 1, ?, ?)`,
			p.ID, p.Input, ts(p.CreatedAt)); err != nil {
			return storage.Work{}, writeErr(err, "queue input")
		}
	}
	t.rows.KeepWork(w)
	if p.OwnKey {
		// A key another Work owns is left to AcquireKey to report.
		res, err := t.q.ExecContext(ctx, `INSERT INTO work_keys (scope, key, work, acquired_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			w.Scope, w.ID, w.ID, ts(p.CreatedAt))
		if err != nil {
			return storage.Work{}, writeErr(err, "acquire key")
		}
		if n, _ := res.RowsAffected(); n == 1 {
			t.rows.KeepOwnedKey(w.Scope, w.ID, w.ID)
		}
	}
	return w, nil
}

func (t *tx) UpdateWork(ctx context.Context, p *storage.UpdateWorkParams) (storage.Work, error) {
	set := []string{"revision = revision + 1", "updated_at = ?"}
	args := []any{ts(p.Now)}
	if p.State != nil {
		if !p.State.Valid() {
			return storage.Work{}, fmt.Errorf("sqlite: work state %q is not valid", *p.State)
		}
		set, args = append(set, "state = ?"), append(args, string(*p.State))
	}
	if p.Binding != nil {
		set, args = append(set, "binding = ?"), append(args, *p.Binding)
	}
	if p.Grants != nil {
		set, args = append(set, "grants = ?"), append(args, jsonList(*p.Grants))
	}
	if p.BlockedReason != nil {
		set, args = append(set, "blocked_reason = ?"), append(args, *p.BlockedReason)
	}
	if p.BlockedDetail != nil {
		set, args = append(set, "blocked_detail = ?"), append(args, *p.BlockedDetail)
	}
	if p.WaitReason != nil {
		set, args = append(set, "wait_reason = ?"), append(args, *p.WaitReason)
	}
	if p.OutcomeMessage != nil {
		set, args = append(set, "outcome_message = ?"), append(args, *p.OutcomeMessage)
	}
	if p.OutcomeData != nil {
		var v any
		if len(*p.OutcomeData) > 0 {
			v = string(*p.OutcomeData)
		}
		set, args = append(set, "outcome_data = ?"), append(args, v)
	}
	if p.InputWatermark != nil {
		set, args = append(set, "input_watermark = ?"), append(args, *p.InputWatermark)
	}
	if p.AddAttempts != 0 {
		set, args = append(set, "attempts = attempts + ?"), append(args, p.AddAttempts)
	}
	var w where
	w.add("id = ?", p.ID)
	w.in("state", stateStrings(p.FromStates))
	if p.Revision != 0 {
		w.add("revision = ?", p.Revision)
	}
	return t.writeWork(ctx, "update work", p.ID, `UPDATE work SET `+strings.Join(set, ", ")+w.sql(), append(args, w.args...)...)
}

func (t *tx) AcquireKey(ctx context.Context, p *storage.AcquireKeyParams) error {
	if p.Key == "" {
		return errors.New("sqlite: an empty key cannot be owned")
	}
	if t.rows.OwnsKey(p.Scope, p.Key, p.Work) {
		return nil // acquired with its Work (InsertWorkParams.OwnKey)
	}
	// The insert first: a free key (the usual case) costs one statement,
	// and only a taken one is looked up (owning it already is fine).
	res, err := t.q.ExecContext(ctx, `INSERT INTO work_keys (scope, key, work, acquired_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		p.Scope, p.Key, p.Work, ts(p.At))
	if err != nil {
		return writeErr(err, "acquire key")
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	var owner string
	err = t.q.QueryRowContext(ctx, `SELECT work FROM work_keys WHERE scope = ? AND key = ? AND released_at IS NULL`, p.Scope, p.Key).Scan(&owner)
	switch {
	case err != nil:
		return fmt.Errorf("sqlite: check key owner: %w", err)
	case owner == p.Work:
		return nil
	}
	return fmt.Errorf("%w: key %q is owned by work %s", storage.ErrDuplicate, p.Key, owner)
}

// ReleaseKeys returns the keys it released and keeps them unowned
// (TxRows.KeepReleasedKeys): routing the Work's core.work.finished, by
// its own id, then needs no read of the key's owner.
func (t *tx) ReleaseKeys(ctx context.Context, workID string, at time.Time) error {
	rows, err := t.q.QueryContext(ctx, `UPDATE work_keys SET released_at = ? WHERE work = ? AND released_at IS NULL RETURNING scope, key`, ts(at), workID)
	keys, err := collect(rows, err, func(r scanner) ([2]string, error) {
		var k [2]string
		return k, r.Scan(&k[0], &k[1])
	})
	if err != nil {
		return writeErr(err, "release keys")
	}
	t.rows.KeepReleasedKeys(keys)
	return nil
}

// GetKeyOwner is the transaction's read of a key's owner: none, without a
// statement, for a key it released itself (TxRows.KeyUnowned).
func (t *tx) GetKeyOwner(ctx context.Context, scope, key string) (storage.Work, error) {
	if t.rows.KeyUnowned(scope, key) {
		return storage.Work{}, fmt.Errorf("%w: owner of key %s", storage.ErrNotFound, key)
	}
	return t.queries.GetKeyOwner(ctx, scope, key)
}

// QueueInput inserts first, at the Work's next position (the single
// writer's transaction makes input_count stable between the two
// statements), and counts it on the Work, keeping the row that returns.
// An event queued already (UNIQUE (work, event)) inserts nothing and is
// looked up; so is a Work that does not exist.
func (t *tx) QueueInput(ctx context.Context, p *storage.QueueInputParams) (storage.Input, error) {
	var pos int64
	err := t.q.QueryRowContext(ctx, `INSERT INTO work_inputs (work, position, event, queued_at)
		SELECT id, input_count + 1, ?, ? FROM work WHERE id = ? ON CONFLICT DO NOTHING RETURNING position`,
		p.Event, ts(p.At), p.Work).Scan(&pos)
	if errors.Is(err, errNoRows) {
		in, err := scanInput(t.q.QueryRowContext(ctx, `SELECT work, position, event, queued_at FROM work_inputs WHERE work = ? AND event = ?`, p.Work, p.Event))
		if errors.Is(err, errNoRows) {
			return storage.Input{}, fmt.Errorf("%w: work %s", storage.ErrNotFound, p.Work)
		}
		if err != nil {
			return storage.Input{}, fmt.Errorf("sqlite: check input: %w", err)
		}
		return in, nil
	}
	if err != nil {
		return storage.Input{}, writeErr(err, "queue input")
	}
	if _, err := t.writeWork(ctx, "queue input", p.Work, `UPDATE work SET input_count = ?, revision = revision + 1, updated_at = ? WHERE id = ?`,
		pos, ts(p.At), p.Work); err != nil {
		return storage.Input{}, err
	}
	return storage.Input{Work: p.Work, Position: pos, Event: p.Event, QueuedAt: fromTS(ts(p.At))}, nil
}

// ---- executions ----

func (t *tx) InsertExecution(ctx context.Context, p *storage.InsertExecutionParams) (storage.Execution, error) {
	// A taken id or a live execution of the Work (executions_live)
	// inserts nothing, and only then is it asked which.
	es, err := t.insertExecutions(ctx, "insert execution", []storage.InsertExecutionParams{*p})
	if err != nil {
		return storage.Execution{}, err
	}
	if len(es) == 1 {
		return es[0], nil
	}
	if dup, err := t.exists(ctx, `SELECT 1 FROM executions WHERE id = ?`, p.ID); err != nil {
		return storage.Execution{}, err
	} else if dup {
		return storage.Execution{}, fmt.Errorf("%w: execution %s exists", storage.ErrDuplicate, p.ID)
	}
	return storage.Execution{}, fmt.Errorf("%w: work %s already has a live execution", storage.ErrDuplicate, p.Work)
}

// InsertExecutions is one multi-row INSERT … ON CONFLICT DO NOTHING; the
// transaction keeps the rows it returns.
func (t *tx) InsertExecutions(ctx context.Context, ps []storage.InsertExecutionParams) ([]storage.Execution, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	return t.insertExecutions(ctx, "insert executions", ps)
}

// insertExecutions is InsertExecution and InsertExecutions: one INSERT of
// every row, what naming the statement in its errors.
func (t *tx) insertExecutions(ctx context.Context, what string, ps []storage.InsertExecutionParams) ([]storage.Execution, error) {
	rows := strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, 'running', ?, ?, ?, ?), ", len(ps)), ", ")
	args := make([]any, 0, 14*len(ps))
	for _, p := range ps {
		var launched int64
		if p.Launched {
			launched = 1
		}
		args = append(args, p.ID, p.Work, p.Scope, p.Binding, p.Executor, p.Generation, p.Owner, p.Node, ts(p.LeaseExpiresAt), ts(p.Deadline), p.InputWatermark,
			launched, ts(p.CreatedAt), ts(p.CreatedAt))
	}
	res, err := t.q.QueryContext(ctx, `INSERT INTO executions (id, work, scope, binding, executor, generation, epoch, owner, node, lease_expires_at, deadline, state, input_watermark, launched_epoch, created_at, updated_at)
		VALUES `+rows+` ON CONFLICT DO NOTHING RETURNING `+execCols, args...)
	es, err := collect(res, err, scanExecution)
	if err != nil {
		return nil, writeErr(err, what)
	}
	for _, e := range es {
		t.rows.KeepExecution(e)
	}
	return es, nil
}

func (t *tx) AdvanceEpoch(ctx context.Context, p *storage.AdvanceEpochParams) (storage.Execution, error) {
	state := p.State
	if state == "" {
		state = storage.ExecutionRunning
	}
	// A new epoch is a segment whose end nobody has observed yet: a parked
	// execution's exit code was its previous segment's.
	set := []string{"epoch = epoch + 1", "owner = ?", "lease_expires_at = ?", "state = ?", "exit_code = NULL", "revision = revision + 1", "updated_at = ?"}
	args := []any{p.Owner, ts(p.LeaseExpiresAt), string(state), ts(p.Now)}
	if p.Deadline != nil {
		set, args = append(set, "deadline = ?"), append(args, ts(*p.Deadline))
	}
	if p.InputWatermark != nil {
		set, args = append(set, "input_watermark = ?"), append(args, *p.InputWatermark)
	}
	if p.Node != "" {
		set, args = append(set, "node = ?"), append(args, p.Node)
	}
	var w where
	w.add("id = ?", p.ID)
	w.add("epoch = ?", p.FromEpoch)
	w.in("state", stateStrings(p.FromStates))
	if !p.ExpiredBy.IsZero() {
		w.add("lease_expires_at <= ?", ts(p.ExpiredBy))
	}
	return t.writeExecution(ctx, "advance epoch", p.ID, `UPDATE executions SET `+strings.Join(set, ", ")+w.sql(), append(args, w.args...)...)
}

func (t *tx) RenewLease(ctx context.Context, p *storage.RenewLeaseParams) (storage.Execution, error) {
	states := p.States
	if len(states) == 0 {
		states = []storage.ExecutionState{storage.ExecutionRunning}
	}
	var w where
	w.add("id = ?", p.ID)
	w.add("epoch = ?", p.Epoch)
	w.add("owner = ?", p.Owner)
	w.add("lease_expires_at > ?", ts(p.ValidAt))
	w.in("state", stateStrings(states))
	return t.writeExecution(ctx, "renew lease", p.ID, `UPDATE executions SET lease_expires_at = ?`+w.sql(), append([]any{ts(p.LeaseExpiresAt)}, w.args...)...)
}

func (t *tx) UpdateExecution(ctx context.Context, p *storage.UpdateExecutionParams) (storage.Execution, error) {
	set := []string{"revision = revision + 1", "updated_at = ?"}
	args := []any{ts(p.Now)}
	if p.State != nil {
		set, args = append(set, "state = ?"), append(args, string(*p.State))
	}
	if p.Result != nil {
		set, args = append(set, "result = ?"), append(args, string(*p.Result))
	}
	if p.Message != nil {
		set, args = append(set, "message = ?"), append(args, *p.Message)
	}
	if p.ExitCode != nil {
		set, args = append(set, "exit_code = ?"), append(args, *p.ExitCode)
	}
	if p.LeaseExpiresAt != nil {
		set, args = append(set, "lease_expires_at = ?"), append(args, ts(*p.LeaseExpiresAt))
	}
	if p.Launched {
		set = append(set, "launched_epoch = epoch")
	}
	if p.Session != nil {
		set, args = append(set, "session = ?"), append(args, *p.Session)
	}
	if u := p.AddUsage; u != nil {
		set = append(set, "usage_input_tokens = COALESCE(usage_input_tokens, 0) + ?", "usage_output_tokens = COALESCE(usage_output_tokens, 0) + ?",
			"usage_cache_read_tokens = COALESCE(usage_cache_read_tokens, 0) + ?", "usage_cache_creation_tokens = COALESCE(usage_cache_creation_tokens, 0) + ?",
			"usage_cost_usd = COALESCE(usage_cost_usd, 0) + ?", "usage_turns = COALESCE(usage_turns, 0) + ?")
		args = append(args, u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheCreationTokens, u.CostUSD, u.Turns)
	}
	var w where
	w.add("id = ?", p.ID)
	w.add("epoch = ?", p.Epoch)
	w.eq("owner", p.Owner)
	w.in("state", stateStrings(p.FromStates))
	return t.writeExecution(ctx, "update execution", p.ID, `UPDATE executions SET `+strings.Join(set, ", ")+w.sql(), append(args, w.args...)...)
}

// claimWorkQuery claims n Work: each matched by its primary key at its
// revision, the state and hold kept out of the index choice (unary +), or
// SQLite would search every ready Work through work_claimable instead
// (TestQueryPlans holds it).
func claimWorkQuery(n int) string {
	return `UPDATE work SET revision = revision + 1, updated_at = ?, state = 'running', input_watermark = input_count, attempts = attempts + 1
		WHERE (` + idPairs(n, "revision") + `) AND +state = 'ready' AND +blocked_reason = '' RETURNING ` + workCols
}

// ClaimWork is one UPDATE for every listed Work (claimWorkQuery); the
// transaction keeps the rows it returns. A claim of Listed rows runs the
// same statement (a statement is microseconds inside the writer here) and
// is refused when it moved fewer than listed.
func (t *tx) ClaimWork(ctx context.Context, p *storage.ClaimWorkParams) ([]storage.Work, error) {
	list := p.Work
	if p.Listed != nil {
		list = storage.Revisions(p.Listed)
	}
	if len(list) == 0 {
		return nil, nil
	}
	args := make([]any, 0, 1+2*len(list))
	args = append(args, ts(p.Now))
	for _, w := range list {
		args = append(args, w.ID, w.Revision)
	}
	rows, err := t.q.QueryContext(ctx, claimWorkQuery(len(list)), args...)
	ws, err := collect(rows, err, scanWork)
	if err != nil {
		return nil, writeErr(err, "claim work")
	}
	for _, w := range ws {
		t.rows.KeepWork(w)
	}
	if p.Listed != nil && len(ws) != len(list) {
		return nil, fmt.Errorf("%w: a listed Work has moved on since it was listed", storage.ErrFenced)
	}
	return ws, nil
}

// markLaunchedQuery marks n launches: each execution matched by its
// primary key at its epoch, an OR of pairs that SQLite serves from the key
// (a row-value IN over VALUES scans the table), the owner and state kept
// out of the index choice (unary +), or SQLite would search every live
// execution of the owner through executions_owner instead; TestQueryPlans
// holds it.
func markLaunchedQuery(n int) string {
	return `UPDATE executions SET revision = revision + 1, updated_at = ?, launched_epoch = epoch
		WHERE (` + idPairs(n, "epoch") + `) AND +owner = ? AND +state IN (?, ?) RETURNING id`
}

// MarkLaunched is one UPDATE for every launch (markLaunchedQuery).
func (t *tx) MarkLaunched(ctx context.Context, p *storage.MarkLaunchedParams) ([]string, error) {
	if len(p.Launches) == 0 {
		return nil, nil
	}
	args := make([]any, 0, 4+2*len(p.Launches))
	args = append(args, ts(p.Now))
	for _, l := range p.Launches {
		args = append(args, l.Execution, l.Epoch)
	}
	args = append(args, p.Owner, string(storage.ExecutionRunning), string(storage.ExecutionStopping))
	rows, err := t.q.QueryContext(ctx, markLaunchedQuery(len(p.Launches)), args...)
	ids, err := collect(rows, err, scanString)
	if err != nil {
		return nil, writeErr(err, "mark launched")
	}
	return ids, nil
}

// ---- declarations ----

func (t *tx) InsertDeclaration(ctx context.Context, d *storage.Declaration) error {
	if dup, err := t.exists(ctx, `SELECT 1 FROM declarations WHERE execution = ? AND (epoch = ? OR applied_at IS NULL)`, d.Execution, d.Epoch); err != nil {
		return err
	} else if dup {
		return fmt.Errorf("%w: execution %s already declared", storage.ErrDuplicate, d.Execution)
	}
	_, err := t.q.ExecContext(ctx, `INSERT INTO declarations (execution, epoch, kind, payload, declared_at) VALUES (?, ?, ?, ?, ?)`,
		d.Execution, d.Epoch, string(d.Kind), string(d.Payload), ts(d.DeclaredAt))
	return writeErr(err, "insert declaration")
}

func (t *tx) MarkDeclarationApplied(ctx context.Context, p *storage.MarkDeclarationAppliedParams) error {
	res, err := t.q.ExecContext(ctx, `UPDATE declarations SET applied_at = ?, disposition = ? WHERE execution = ? AND epoch = ? AND applied_at IS NULL`,
		ts(p.At), p.Disposition, p.Execution, p.Epoch)
	if err != nil {
		return writeErr(err, "mark declaration applied")
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("%w: declaration of %s epoch %d is not pending", storage.ErrFenced, p.Execution, p.Epoch)
	}
	return nil
}

// ---- waits and timers ----

func (t *tx) InsertWait(ctx context.Context, p *storage.InsertWaitParams) (storage.Wait, error) {
	if dup, err := t.exists(ctx, `SELECT 1 FROM waits WHERE work = ? AND state = 'active'`, p.Work); err != nil {
		return storage.Wait{}, err
	} else if dup {
		return storage.Wait{}, fmt.Errorf("%w: work %s already has an active wait", storage.ErrDuplicate, p.Work)
	}
	_, err := t.q.ExecContext(ctx, `INSERT INTO waits (id, work, scope, execution, epoch, registration, types, keys, on_work_keys, watermark, timer, timeout_at, state, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'active', ?, ?)`,
		p.ID, p.Work, p.Scope, nullStr(p.Execution), p.Epoch, p.Registration, jsonList(p.Types), jsonList(p.Keys), p.OnWorkKeys,
		p.Watermark, nullStr(p.Timer), ts(p.TimeoutAt), ts(p.CreatedAt), ts(p.CreatedAt))
	if err != nil {
		return storage.Wait{}, writeErr(err, "insert wait")
	}
	for _, k := range dedupe(p.Keys) {
		if _, err := t.q.ExecContext(ctx, `INSERT INTO wait_keys (wait, key) VALUES (?, ?)`, p.ID, k); err != nil {
			return storage.Wait{}, writeErr(err, "insert wait key")
		}
	}
	return t.GetWait(ctx, p.ID)
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func (t *tx) UpdateWait(ctx context.Context, p *storage.UpdateWaitParams) (storage.Wait, error) {
	res, err := t.q.ExecContext(ctx, `UPDATE waits SET state = ?, satisfied_by = ?, updated_at = ? WHERE id = ? AND state = 'active'`,
		string(p.State), nullStr(p.SatisfiedBy), ts(p.Now), p.ID)
	if err != nil {
		return storage.Wait{}, writeErr(err, "update wait")
	}
	n, _ := res.RowsAffected()
	if err := t.fenced(ctx, "waits", p.ID, n, "wait"); err != nil {
		return storage.Wait{}, err
	}
	return t.GetWait(ctx, p.ID)
}

func (t *tx) InsertTimer(ctx context.Context, tm *storage.Timer) error {
	if dup, err := t.exists(ctx, `SELECT 1 FROM timers WHERE id = ?`, tm.ID); err != nil {
		return err
	} else if dup {
		return fmt.Errorf("%w: timer %s exists", storage.ErrDuplicate, tm.ID)
	}
	_, err := t.q.ExecContext(ctx, `INSERT INTO timers (id, kind, target, due_at, created_at) VALUES (?, ?, ?, ?, ?)`,
		tm.ID, tm.Kind, tm.Target, ts(tm.DueAt), ts(tm.CreatedAt))
	return writeErr(err, "insert timer")
}

func (t *tx) FireTimer(ctx context.Context, id string, at time.Time) error {
	res, err := t.q.ExecContext(ctx, `UPDATE timers SET fired_at = ? WHERE id = ? AND fired_at IS NULL`, ts(at), id)
	if err != nil {
		return writeErr(err, "fire timer")
	}
	n, _ := res.RowsAffected()
	return t.fenced(ctx, "timers", id, n, "timer")
}

// ---- artifacts ----

func (t *tx) InsertArtifact(ctx context.Context, a *storage.Artifact) error {
	if dup, err := t.exists(ctx, `SELECT 1 FROM artifacts WHERE id = ?`, a.ID); err != nil {
		return err
	} else if dup {
		return fmt.Errorf("%w: artifact %s exists", storage.ErrDuplicate, a.ID)
	}
	_, err := t.q.ExecContext(ctx, `INSERT INTO artifacts (id, execution, work, name, media_type, size, sha256, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		a.ID, a.Execution, a.Work, a.Name, a.MediaType, a.Size, a.SHA256, ts(a.CreatedAt))
	return writeErr(err, "insert artifact")
}

// InsertArtifactChunk is refused: SQLite keeps artifact bytes as files
// (ArtifactBlobs).
func (t *tx) InsertArtifactChunk(_ context.Context, c *storage.ArtifactChunk) error {
	return fmt.Errorf("sqlite: artifact %s: this store keeps artifact bytes as files, not in chunks", c.Artifact)
}
