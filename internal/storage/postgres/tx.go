package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// exists reports whether query returns a row.
func (t *tx) exists(ctx context.Context, query string, args ...any) (bool, error) {
	var one int
	err := t.q.queryRow(ctx, query, args...).Scan(&one)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		return false, fmt.Errorf("postgres: check: %s", engineMessage(err))
	}
	return true, nil
}

// insert runs an INSERT ... ON CONFLICT DO NOTHING and reports whether it
// wrote its row: a taken identity (any unique index, another daemon's
// concurrent insert included, once that one committed) is reported without
// aborting the transaction, so that the caller can go on (the contract's
// usable-after-refusal rule).
func (t *tx) insert(ctx context.Context, what, query string, args ...any) (bool, error) {
	tag, err := t.q.exec(ctx, query+` ON CONFLICT DO NOTHING`, args...)
	if err != nil {
		return false, writeErr(err, what)
	}
	return tag.RowsAffected() == 1, nil
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
	return movedOn(what, id)
}

// movedOn is the refusal of a compare-and-set whose row exists.
func movedOn(what, id string) error {
	return fmt.Errorf("%w: %s %s has moved on", storage.ErrFenced, what, id)
}

// ---- events ----

// InsertEvent numbers the event in its batch (see group.go): the counter
// row, locked by the batch's first statement and held until it commits,
// so that every other accepting transaction, of this daemon or another,
// waits for it, and the sequence is gap-free and increases in commit
// order. The number is the counter as the batch found it plus the
// batch's events before this one; the row itself moves at the COMMIT.
//
// A fresh event (storage.InsertEventParams.Fresh) is a write whose result
// the caller knows: it travels with the caller's next statement, or at
// the end of its turn, without a round trip of its own, and the number is
// counted here (a taken identity, which a fresh event cannot meet, fails
// that statement and so the transaction). Any other, and a fresh one
// before the batch has read the counter, is inserted at once: its ON
// CONFLICT finds a taken id or delivery in the unique indexes, which hold
// every committed event, and only a refusal costs a second statement, to
// say which identity was taken.
func (t *tx) InsertEvent(ctx context.Context, p *storage.InsertEventParams) (storage.Event, error) {
	if p.ID == "" || p.Root == "" {
		return storage.Event{}, errors.New("postgres: an event needs an id and a root")
	}
	data := p.Data
	if len(data) == 0 {
		data = json.RawMessage(`{}`)
	}
	b := t.q.turn.b
	// The number counts the batch's events: the late writes of a caller
	// before this one go first, since their failure takes that caller's
	// events back.
	if err := b.settle(ctx); err != nil {
		return storage.Event{}, err
	}
	args := []any{p.ID, p.Type, p.Source, p.Scope, p.Work, p.Execution, p.CorrelationKey, string(data), nullStr(p.Parent), p.Root, p.Depth,
		p.Actor, p.DeliveryID, ts(p.AcceptedAt)}
	var seq int64
	if p.Fresh && b.based {
		seq = b.base + b.n + 1
		if err := t.q.deferred(ctx, pending{sql: `INSERT INTO events (seq, id, type, source, scope, work, execution, correlation_key, data, parent, root, depth, actor, delivery_id, accepted_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, args: append([]any{seq}, args...), numbered: true}); err != nil {
			return storage.Event{}, err
		}
	} else {
		err := t.q.queryRow(ctx, `INSERT INTO events (seq, id, type, source, scope, work, execution, correlation_key, data, parent, root, depth, actor, delivery_id, accepted_at)
			VALUES ((SELECT last FROM event_counter WHERE id = 1) + ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING seq`,
			append([]any{b.n + 1}, args...)...).Scan(&seq)
		if errors.Is(err, pgx.ErrNoRows) {
			return storage.Event{}, t.eventTaken(ctx, p)
		}
		if err != nil {
			return storage.Event{}, writeErr(err, "insert event")
		}
	}
	b.n++
	e := storage.Event{
		Seq: seq, ID: p.ID, Type: p.Type, Source: p.Source, Scope: p.Scope, Work: p.Work, Execution: p.Execution,
		CorrelationKey: p.CorrelationKey, Data: data, Parent: p.Parent, Root: p.Root, Depth: p.Depth, Actor: p.Actor,
		DeliveryID: p.DeliveryID, AcceptedAt: fromTS(ts(p.AcceptedAt)),
	}
	t.q.turn.rows.KeepEvent(e)
	return e, nil
}

// LastSeq is the counter as the batch found it and the batch's events
// since (the row moves at the COMMIT, see group.go).
func (t *tx) LastSeq(ctx context.Context) (int64, error) {
	b := t.q.turn.b
	if err := b.settle(ctx); err != nil {
		return 0, err
	}
	if b.based {
		if _, err := t.q.enter(ctx, `SELECT last FROM event_counter WHERE id = 1`); err != nil {
			return 0, err
		}
		return b.base + b.n, nil
	}
	var n int64
	if err := t.q.queryRow(ctx, `SELECT last + ? FROM event_counter WHERE id = 1`, b.n).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: last seq: %s", engineMessage(err))
	}
	return n, nil
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
	return errors.New("postgres: insert event: the event sequence's next number is taken; check the event_counter row")
}

func (t *tx) InsertCausalRoot(ctx context.Context, r *storage.CausalRoot) error {
	ok, err := t.insert(ctx, "pin causal root", `INSERT INTO causal_roots (root, max_depth, per_minute, window_start, window_count, pinned_at) VALUES (?, ?, ?, ?, ?, ?)`,
		r.Root, r.MaxDepth, r.PerMinute, ts(r.WindowStart), r.WindowCount, ts(r.PinnedAt))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: causal root %s is pinned", storage.ErrDuplicate, r.Root)
	}
	return nil
}

// CountCausal is the window's arithmetic of the kernel's
// AcceptDerivedInTx in one UPDATE: the window restarts when a minute
// (in nanoseconds, as times are stored) has passed or the clock went
// back, and the count is refused at per_minute.
func (t *tx) CountCausal(ctx context.Context, p *storage.CountCausalParams) (storage.CausalRoot, error) {
	now, minute := ts(p.Now), time.Minute.Nanoseconds()
	var r storage.CausalRoot
	var ws, pa int64
	err := t.q.queryRow(ctx, `UPDATE causal_roots SET
			window_start = CASE WHEN ? - window_start >= ? OR ? < window_start THEN ? ELSE window_start END,
			window_count = CASE WHEN ? - window_start >= ? OR ? < window_start THEN 1 ELSE window_count + 1 END
		WHERE root = ? AND max_depth >= ?
		  AND (CASE WHEN ? - window_start >= ? OR ? < window_start THEN 0 ELSE window_count END) < per_minute
		RETURNING root, max_depth, per_minute, window_start, window_count, pinned_at`,
		now, minute, now, now, now, minute, now, p.Root, p.Depth, now, minute, now).
		Scan(&r.Root, &r.MaxDepth, &r.PerMinute, &ws, &r.WindowCount, &pa)
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.CausalRoot{}, fmt.Errorf("%w: causal root %s is not pinned or the event is over its limits", storage.ErrFenced, p.Root)
	}
	if err != nil {
		return storage.CausalRoot{}, writeErr(err, "count causal window")
	}
	r.WindowStart, r.PinnedAt = fromTS(ws), fromTS(pa)
	return r, nil
}

func (t *tx) UpdateCausalWindow(ctx context.Context, p *storage.UpdateCausalWindowParams) error {
	tag, err := t.q.exec(ctx, `UPDATE causal_roots SET window_start = ?, window_count = ?
		WHERE root = ? AND window_start = ? AND window_count = ?`,
		ts(p.WindowStart), p.WindowCount, p.Root, ts(p.FromWindowStart), p.FromWindowCount)
	if err != nil {
		return writeErr(err, "update causal window")
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("%w: causal window of %s has moved on", storage.ErrFenced, p.Root)
	}
	return nil
}

// ---- work ----

// insertWork is the insert of a Work row, with InsertWork's arguments.
const insertWork = `INSERT INTO work (id, scope, binding, state, parent, created_event, grants, input_count, created_at, updated_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

func (t *tx) InsertWork(ctx context.Context, p *storage.InsertWorkParams) (storage.Work, error) {
	if !p.State.Valid() {
		return storage.Work{}, fmt.Errorf("postgres: work state %q is not valid", p.State)
	}
	insert := insertWork + ` ON CONFLICT DO NOTHING RETURNING ` + workCols
	args := []any{p.ID, p.Scope, p.Binding, string(p.State), nullStr(p.Parent), p.CreatedEvent, jsonList(p.Grants), 0, ts(p.CreatedAt), ts(p.CreatedAt)}
	if p.Assumed && t.q.inBatch() && storable(&p.ID, &p.Scope, &p.Binding, &p.Parent, &p.CreatedEvent, &p.Input) {
		return t.insertAssumedWork(ctx, p, args)
	}
	query := insert
	if p.Input != "" || p.OwnKey {
		// The first input and the key in the same statement: each is
		// inserted only when the Work is (PostgreSQL runs every
		// data-modifying WITH once).
		with, sel := []string{`w AS (` + insert + `)`}, `SELECT `+workCols
		if p.Input != "" {
			args[7] = 1
			with = append(with, `i AS (INSERT INTO work_inputs (work, position, event, queued_at) SELECT id, 1, ?, ? FROM w)`)
			args = append(args, p.Input, ts(p.CreatedAt))
		}
		if p.OwnKey {
			// A key another Work owns is left to AcquireKey to report.
			with = append(with, `k AS (INSERT INTO work_keys (scope, key, work, acquired_at) SELECT scope, id, id, created_at FROM w ON CONFLICT DO NOTHING RETURNING 1)`)
			sel += `, EXISTS (SELECT 1 FROM k)`
		}
		query = `WITH ` + strings.Join(with, `, `) + ` ` + sel + ` FROM w`
	}
	var row workRow
	var owned bool
	dest := row.dest()
	if p.OwnKey {
		dest = append(dest, &owned)
	}
	err := t.q.queryRow(ctx, query, args...).Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.Work{}, fmt.Errorf("%w: work %s exists", storage.ErrDuplicate, p.ID)
	}
	if err != nil {
		return storage.Work{}, writeErr(err, "insert work")
	}
	w, err := row.record()
	if err != nil {
		return storage.Work{}, err
	}
	t.q.turn.rows.KeepWrittenWork(w)
	if owned {
		t.q.turn.rows.KeepOwnedKey(w.Scope, w.ID, w.ID)
	}
	return w, nil
}

// insertAssumedWork is InsertWork of a Work its caller assumes new
// (InsertWorkParams.Assumed), in a batch: the Work as its insert leaves
// it is computed from p, kept and returned, and the insert travels with
// the caller's next statement, or the end of its turn. It inserts the
// first input and the own key with it, without ON CONFLICT: a Work that
// exists, or a key another Work owns, breaks a unique index, which fails
// the transaction as ErrDuplicate (fenceErr). args are the Work's own
// insert's.
func (t *tx) insertAssumedWork(ctx context.Context, p *storage.InsertWorkParams, args []any) (storage.Work, error) {
	grants, err := parseList(jsonList(p.Grants))
	if err != nil {
		return storage.Work{}, err
	}
	at := fromTS(ts(p.CreatedAt))
	w := storage.Work{ID: p.ID, Scope: p.Scope, Binding: p.Binding, State: p.State, Parent: p.Parent, CreatedEvent: p.CreatedEvent,
		Grants: grants, Revision: 1, CreatedAt: at, UpdatedAt: at}
	with := []string{`w AS (` + insertWork + ` RETURNING id, scope, created_at)`}
	if p.Input != "" {
		w.InputCount = 1
		args[7] = 1
		with = append(with, `i AS (INSERT INTO work_inputs (work, position, event, queued_at) SELECT id, 1, ?, created_at FROM w)`)
		args = append(args, p.Input)
	}
	if p.OwnKey {
		with = append(with, `k AS (INSERT INTO work_keys (scope, key, work, acquired_at) SELECT scope, id, id, created_at FROM w)`)
	}
	if err := t.q.deferred(ctx, pending{sql: `WITH ` + strings.Join(with, `, `) + ` SELECT 1`, args: args, assumed: p.ID}); err != nil {
		return storage.Work{}, err
	}
	t.q.turn.rows.KeepWrittenWork(w)
	if p.OwnKey {
		t.q.turn.rows.KeepOwnedKey(w.Scope, w.ID, w.ID)
	}
	return w, nil
}

func (t *tx) UpdateWork(ctx context.Context, p *storage.UpdateWorkParams) (storage.Work, error) {
	set := []string{"revision = revision + 1", "updated_at = ?"}
	args := []any{ts(p.Now)}
	if p.State != nil {
		if !p.State.Valid() {
			return storage.Work{}, fmt.Errorf("postgres: work state %q is not valid", *p.State)
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
		var v *string
		if len(*p.OutcomeData) > 0 {
			s := string(*p.OutcomeData)
			v = &s
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
	query, args := `UPDATE work SET `+strings.Join(set, ", ")+w.sql(), append(args, w.args...)
	if cur, ok := t.keptWork(p); ok {
		return t.updateKeptWork(ctx, cur, p, query, args)
	}
	return t.writeWork(ctx, "update work", p.ID, query, args...)
}

func (t *tx) keyOwner(ctx context.Context, scope, key string) (string, error) {
	var owner string
	err := t.q.queryRow(ctx, `SELECT work FROM work_keys WHERE scope = ? AND key = ? AND released_at IS NULL`, scope, key).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("postgres: check key owner: %s", engineMessage(err))
	}
	return owner, nil
}

func (t *tx) AcquireKey(ctx context.Context, p *storage.AcquireKeyParams) error {
	if p.Key == "" {
		return errors.New("postgres: an empty key cannot be owned")
	}
	if t.q.turn.rows.OwnsKey(p.Scope, p.Key, p.Work) {
		return nil // acquired with its Work (InsertWorkParams.OwnKey)
	}
	// The insert first: a free key (the usual case) costs one statement.
	// A taken one is looked up: owning it already is fine; a key released
	// between the two is tried once more.
	for range 2 {
		ok, err := t.insert(ctx, "acquire key", `INSERT INTO work_keys (scope, key, work, acquired_at) VALUES (?, ?, ?, ?)`, p.Scope, p.Key, p.Work, ts(p.At))
		if err != nil || ok {
			return err
		}
		owner, err := t.keyOwner(ctx, p.Scope, p.Key)
		switch {
		case err != nil:
			return err
		case owner == p.Work:
			return nil
		case owner != "":
			return fmt.Errorf("%w: key %q is owned by work %s", storage.ErrDuplicate, p.Key, owner)
		}
	}
	return fmt.Errorf("%w: key %q is owned by another work", storage.ErrDuplicate, p.Key)
}

// ReleaseKeys returns nothing: the update travels with the next
// statement (a failure is that statement's, or the turn's). The keys a
// guard read found the Work owning are kept unowned (TxRows.KeysOwnedBy),
// so that routing its core.work.finished, by its own id, needs no read of
// the key's owner.
func (t *tx) ReleaseKeys(ctx context.Context, workID string, at time.Time) error {
	owned := t.q.turn.rows.KeysOwnedBy(workID)
	if err := t.q.deferred(ctx, pending{sql: `UPDATE work_keys SET released_at = ? WHERE work = ? AND released_at IS NULL`,
		args: []any{ts(at), workID}, only: storage.RowScope{KeysOf: workID}}); err != nil {
		return err
	}
	t.q.turn.rows.KeepReleasedKeys(owned)
	return nil
}

// QueueInput locks the Work's row first, so that two daemons queuing for
// the same Work number their inputs one after the other and the same
// event is queued once. The statement after the lock (a fresh snapshot)
// finds the event queued already, or queues it and counts it, at once.
//
// A Work row the transaction keeps (see storage.TxRows) is kept counted,
// when the lock shows it was current: the caller that queues an input
// reads its Work next.
func (t *tx) QueueInput(ctx context.Context, p *storage.QueueInputParams) (storage.Input, error) {
	kept, wasKept := t.q.turn.rows.Work(p.Work)
	var count, revision int64
	if w, ok := t.q.turn.rows.WrittenWork(p.Work); ok {
		// Written by this transaction (a Work it just created, say): it
		// holds the row's lock already and knows its counter.
		count, revision = w.InputCount, w.Revision
	} else if err := t.q.queryRow(ctx, `SELECT input_count, revision FROM work WHERE id = ? FOR UPDATE`, p.Work).Scan(&count, &revision); err != nil {
		return storage.Input{}, one(err, "work", p.Work)
	}
	pos := count + 1
	// The UPDATE runs although the SELECT does not read it: PostgreSQL
	// runs every data-modifying WITH exactly once.
	in, err := scanInput(t.q.queryRow(ctx, `WITH prior AS (SELECT work, position, event, queued_at FROM work_inputs WHERE work = ? AND event = ?),
		ins AS (INSERT INTO work_inputs (work, position, event, queued_at) SELECT ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM prior)
			RETURNING work, position, event, queued_at),
		counted AS (UPDATE work SET input_count = ?, revision = revision + 1, updated_at = ? WHERE id = ? AND EXISTS (SELECT 1 FROM ins))
		SELECT work, position, event, queued_at FROM ins UNION ALL SELECT work, position, event, queued_at FROM prior`,
		p.Work, p.Event, p.Work, pos, p.Event, ts(p.At), pos, ts(p.At), p.Work))
	if err != nil {
		return storage.Input{}, writeErr(err, "queue input")
	}
	if in.Position == pos && wasKept && kept.InputCount == count && kept.Revision == revision {
		kept.InputCount, kept.Revision, kept.UpdatedAt = pos, revision+1, fromTS(ts(p.At))
		t.q.turn.rows.KeepWrittenWork(kept)
	}
	return in, nil
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
	res, err := t.q.query(ctx, `INSERT INTO executions (id, work, scope, binding, executor, generation, epoch, owner, node, lease_expires_at, deadline, state, input_watermark, launched_epoch, created_at, updated_at)
		VALUES `+rows+` ON CONFLICT DO NOTHING RETURNING `+execCols, args...)
	es, err := collect(res, err, scanExecution)
	if err != nil {
		return nil, writeErr(err, what)
	}
	for _, e := range es {
		t.q.turn.rows.KeepExecution(e)
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
	query, args := `UPDATE executions SET `+strings.Join(set, ", ")+w.sql(), append(args, w.args...)
	if cur, ok := t.keptExecution(p); ok {
		return t.updateKeptExecution(ctx, cur, p, query, args)
	}
	return t.writeExecution(ctx, "update execution", p.ID, query, args...)
}

// claimWork is the UPDATE of a claim of n Work, each matched by its
// primary key at its revision.
func claimWork(n int) string {
	return `UPDATE work SET revision = revision + 1, updated_at = ?, state = 'running', input_watermark = input_count, attempts = attempts + 1
		WHERE (` + idPairs(n, "revision") + `) AND state = 'ready' AND blocked_reason = ''`
}

// ClaimWork is one UPDATE for every listed Work (claimWork); the
// transaction keeps the rows it returns, which it holds locked to its
// end. A claim of Listed rows in a batch is answered from them
// (claimListed).
func (t *tx) ClaimWork(ctx context.Context, p *storage.ClaimWorkParams) ([]storage.Work, error) {
	list := p.Work
	if p.Listed != nil {
		if t.q.inBatch() {
			return t.claimListed(ctx, p)
		}
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
	rows, err := t.q.query(ctx, claimWork(len(list))+` RETURNING `+workCols, args...)
	ws, err := collect(rows, err, scanWork)
	if err != nil {
		return nil, writeErr(err, "claim work")
	}
	for _, w := range ws {
		t.q.turn.rows.KeepWrittenWork(w)
	}
	if p.Listed != nil && len(ws) != len(list) {
		return nil, movedOn("work", "listed for the claim")
	}
	return ws, nil
}

// MarkLaunched is one UPDATE for every launch: each execution matched by
// its primary key at its epoch (idPairs).
func (t *tx) MarkLaunched(ctx context.Context, p *storage.MarkLaunchedParams) ([]string, error) {
	if len(p.Launches) == 0 {
		return nil, nil
	}
	args := make([]any, 0, 4+2*len(p.Launches))
	args = append(args, ts(p.Now), p.Owner, string(storage.ExecutionRunning), string(storage.ExecutionStopping))
	for _, l := range p.Launches {
		args = append(args, l.Execution, l.Epoch)
	}
	rows, err := t.q.query(ctx, `UPDATE executions SET revision = revision + 1, updated_at = ?, launched_epoch = epoch
		WHERE owner = ? AND state IN (?, ?) AND (`+idPairs(len(p.Launches), "epoch")+`) RETURNING id`, args...)
	ids, err := collect(rows, err, scanString)
	if err != nil {
		return nil, writeErr(err, "mark launched")
	}
	return ids, nil
}

// ---- declarations ----

func (t *tx) InsertDeclaration(ctx context.Context, d *storage.Declaration) error {
	ok, err := t.insert(ctx, "insert declaration", `INSERT INTO declarations (execution, epoch, kind, payload, declared_at) VALUES (?, ?, ?, ?, ?)`,
		d.Execution, d.Epoch, string(d.Kind), string(d.Payload), ts(d.DeclaredAt))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: execution %s already declared", storage.ErrDuplicate, d.Execution)
	}
	return nil
}

func (t *tx) MarkDeclarationApplied(ctx context.Context, p *storage.MarkDeclarationAppliedParams) error {
	tag, err := t.q.exec(ctx, `UPDATE declarations SET applied_at = ?, disposition = ? WHERE execution = ? AND epoch = ? AND applied_at IS NULL`,
		ts(p.At), p.Disposition, p.Execution, p.Epoch)
	if err != nil {
		return writeErr(err, "mark declaration applied")
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("%w: declaration of %s epoch %d is not pending", storage.ErrFenced, p.Execution, p.Epoch)
	}
	return nil
}

// ---- waits and timers ----

func (t *tx) InsertWait(ctx context.Context, p *storage.InsertWaitParams) (storage.Wait, error) {
	ok, err := t.insert(ctx, "insert wait", `INSERT INTO waits (id, work, scope, execution, epoch, registration, types, keys, on_work_keys, watermark, timer, timeout_at, state, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'active', ?, ?)`,
		p.ID, p.Work, p.Scope, nullStr(p.Execution), p.Epoch, p.Registration, jsonList(p.Types), jsonList(p.Keys), p.OnWorkKeys,
		p.Watermark, nullStr(p.Timer), ts(p.TimeoutAt), ts(p.CreatedAt), ts(p.CreatedAt))
	if err != nil {
		return storage.Wait{}, err
	}
	if !ok {
		if dup, err := t.exists(ctx, `SELECT 1 FROM waits WHERE id = ?`, p.ID); err != nil {
			return storage.Wait{}, err
		} else if dup {
			return storage.Wait{}, fmt.Errorf("%w: wait %s exists", storage.ErrDuplicate, p.ID)
		}
		return storage.Wait{}, fmt.Errorf("%w: work %s already has an active wait", storage.ErrDuplicate, p.Work)
	}
	for _, k := range dedupe(p.Keys) {
		if _, err := t.q.exec(ctx, `INSERT INTO wait_keys (wait, key) VALUES (?, ?)`, p.ID, k); err != nil {
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
	tag, err := t.q.exec(ctx, `UPDATE waits SET state = ?, satisfied_by = ?, updated_at = ? WHERE id = ? AND state = 'active'`,
		string(p.State), nullStr(p.SatisfiedBy), ts(p.Now), p.ID)
	if err != nil {
		return storage.Wait{}, writeErr(err, "update wait")
	}
	if err := t.fenced(ctx, "waits", p.ID, tag.RowsAffected(), "wait"); err != nil {
		return storage.Wait{}, err
	}
	return t.GetWait(ctx, p.ID)
}

func (t *tx) InsertTimer(ctx context.Context, tm *storage.Timer) error {
	ok, err := t.insert(ctx, "insert timer", `INSERT INTO timers (id, kind, target, due_at, created_at) VALUES (?, ?, ?, ?, ?)`,
		tm.ID, tm.Kind, tm.Target, ts(tm.DueAt), ts(tm.CreatedAt))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: timer %s exists", storage.ErrDuplicate, tm.ID)
	}
	return nil
}

func (t *tx) FireTimer(ctx context.Context, id string, at time.Time) error {
	tag, err := t.q.exec(ctx, `UPDATE timers SET fired_at = ? WHERE id = ? AND fired_at IS NULL`, ts(at), id)
	if err != nil {
		return writeErr(err, "fire timer")
	}
	return t.fenced(ctx, "timers", id, tag.RowsAffected(), "timer")
}

// ---- artifacts ----

func (t *tx) InsertArtifact(ctx context.Context, a *storage.Artifact) error {
	ok, err := t.insert(ctx, "insert artifact", `INSERT INTO artifacts (id, execution, work, name, media_type, size, sha256, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		a.ID, a.Execution, a.Work, a.Name, a.MediaType, a.Size, a.SHA256, ts(a.CreatedAt))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: artifact %s exists", storage.ErrDuplicate, a.ID)
	}
	return nil
}

func (t *tx) InsertArtifactChunk(ctx context.Context, c *storage.ArtifactChunk) error {
	ok, err := t.exists(ctx, `SELECT 1 FROM artifacts WHERE id = ?`, c.Artifact)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: artifact %s (its row comes before its chunks)", storage.ErrNotFound, c.Artifact)
	}
	ok, err = t.insert(ctx, "insert artifact chunk", `INSERT INTO artifact_chunks (artifact, seq, data) VALUES (?, ?, ?)`, c.Artifact, c.Seq, c.Data)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: chunk %d of artifact %s exists", storage.ErrDuplicate, c.Seq, c.Artifact)
	}
	return nil
}
