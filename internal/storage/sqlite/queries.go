package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/open-conduit/open-conduit/internal/storage"
)

var errNoRows = sql.ErrNoRows

// querier is what both the reader pool and a transaction offer.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// queries implements storage.Reader on a querier.
type queries struct{ q querier }

// tx implements storage.Tx. rows keeps what it read of Work,
// executions and events (GetWork, GetExecution, GetEvent, GetCallGuard)
// for its own later reads; events is the store's cache of committed
// events.
type tx struct {
	queries
	rows   *storage.TxRows
	events *storage.EventCache
}

func (t *tx) GetWork(ctx context.Context, id string) (storage.Work, error) {
	return t.rows.ReadWork(ctx, id, t.queries.GetWork)
}

func (t *tx) GetExecution(ctx context.Context, id string) (storage.Execution, error) {
	return t.rows.ReadExecution(ctx, id, t.queries.GetExecution)
}

func (t *tx) GetEvent(ctx context.Context, id string) (storage.Event, error) {
	return t.rows.ReadEvent(ctx, id, func(ctx context.Context, id string) (storage.Event, error) {
		return t.events.Lookup(id, func() (storage.Event, error) { return t.queries.GetEvent(ctx, id) })
	})
}

// GetEvent reads an event through the store's cache of committed events.
func (s *Store) GetEvent(ctx context.Context, id string) (storage.Event, error) {
	return s.events.Read(id, func() (storage.Event, error) { return s.queries.GetEvent(ctx, id) })
}

// KeptWork implements storage.Keeper.
func (t *tx) KeptWork(id string) (storage.Work, bool) { return t.rows.Work(id) }

// KeptExecution implements storage.Keeper.
func (t *tx) KeptExecution(id string) (storage.Execution, bool) { return t.rows.Execution(id) }

func (t *tx) GetCallGuard(ctx context.Context, executionID string) (storage.CallGuard, error) {
	return t.rows.ReadCallGuard(ctx, executionID, t.queries.GetCallGuard)
}

// ReadCallGuardsAhead reads nothing ahead: a guard read is a few
// microseconds inside the writer here, and the transaction's writes would
// mostly drop the guards read ahead (storage.TxRows.StatementOn) before
// their use.
func (t *tx) ReadCallGuardsAhead(context.Context, []string) error { return nil }

// GetActiveWait is the transaction's read of a Work's active wait: none,
// without a statement, when the transaction's guard read found none and
// nothing since changed the waits (TxRows.NoActiveWait).
func (t *tx) GetActiveWait(ctx context.Context, workID string) (storage.Wait, error) {
	if t.rows.NoActiveWait(workID) {
		return storage.Wait{}, fmt.Errorf("%w: active wait of work %s", storage.ErrNotFound, workID)
	}
	return t.queries.GetActiveWait(ctx, workID)
}

// ListActiveWaitsByKey is the transaction's read of the waits naming a
// key: none, without a statement, where a guard read found none
// (TxRows.NoWaitsByKey).
func (t *tx) ListActiveWaitsByKey(ctx context.Context, scope, key string) ([]storage.Wait, error) {
	if t.rows.NoWaitsByKey(scope, key) {
		return nil, nil
	}
	return t.queries.ListActiveWaitsByKey(ctx, scope, key)
}

var (
	_ storage.Tx     = (*tx)(nil)
	_ storage.Keeper = (*tx)(nil)
)

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// Times are stored as Unix nanoseconds; 0 is the zero time.
func ts(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromTS(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func nullTS(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return fromTS(n.Int64)
}

// Optional references are NULL when empty.
func nullStr(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func strOf(n sql.NullString) string { return n.String }

func jsonList(v []string) string {
	if v == nil {
		v = []string{}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func parseList(s string) ([]string, error) {
	if s == "[]" {
		// Most lists are empty (every Work without grants): no decoder.
		return []string{}, nil
	}
	var v []string
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, fmt.Errorf("sqlite: corrupt list %q: %w", s, err)
	}
	if v == nil {
		v = []string{}
	}
	return v, nil
}

// one maps sql.ErrNoRows to storage.ErrNotFound at the driver edge.
func one(err error, what, id string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: %s %s", storage.ErrNotFound, what, id)
	}
	if err != nil {
		return fmt.Errorf("sqlite: read %s %s: %w", what, id, err)
	}
	return nil
}

// writeErr maps a write's engine error.
func writeErr(err error, what string) error {
	if err == nil {
		return nil
	}
	if isConstraint(err) {
		return fmt.Errorf("%w: %s: %v", storage.ErrDuplicate, what, err)
	}
	return fmt.Errorf("sqlite: %s: %w", what, err)
}

// idPairs is the condition of a statement over n rows named by their id
// and one more column, col: "(id = ? AND col = ?) OR …", an OR the planner
// serves from the primary key, with 2n arguments, id then col.
func idPairs(n int, col string) string {
	return strings.TrimSuffix(strings.Repeat("(id = ? AND "+col+" = ?) OR ", n), " OR ")
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// where builds a WHERE clause from conditions.
type where struct {
	conds []string
	args  []any
}

func (w *where) add(cond string, args ...any) {
	w.conds = append(w.conds, cond)
	w.args = append(w.args, args...)
}

func (w *where) eq(col string, v string) {
	if v != "" {
		w.add(col+" = ?", v)
	}
}

func (w *where) in(col string, vs []string) {
	if len(vs) == 0 {
		return
	}
	args := make([]any, len(vs))
	for i, v := range vs {
		args[i] = v
	}
	w.add(col+" IN ("+placeholders(len(vs))+")", args...)
}

func (w *where) sql() string {
	if len(w.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w.conds, " AND ")
}

// page adds the keyset conditions on (created_at, id) and returns the
// ORDER BY and LIMIT clause.
func (w *where) page(p storage.Page) string {
	if p.Until != nil {
		w.add("(created_at, id) <= (?, ?)", ts(p.Until.CreatedAt), p.Until.ID)
	}
	order := " ORDER BY created_at, id"
	if p.Desc {
		order = " ORDER BY created_at DESC, id DESC"
		if p.After != nil {
			w.add("(created_at, id) < (?, ?)", ts(p.After.CreatedAt), p.After.ID)
		}
	} else if p.After != nil {
		w.add("(created_at, id) > (?, ?)", ts(p.After.CreatedAt), p.After.ID)
	}
	return order + fmt.Sprintf(" LIMIT %d", storage.EffectiveLimit(p.Limit))
}

func collect[T any](rows *sql.Rows, err error, scan func(scanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, fmt.Errorf("sqlite: query: %w", err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: query: %w", err)
	}
	return out, nil
}

func stateStrings[S ~string](states []S) []string {
	out := make([]string, len(states))
	for i, s := range states {
		out[i] = string(s)
	}
	return out
}

// ---- events ----

const eventCols = `seq, id, type, source, scope, work, execution, correlation_key, data, parent, root, depth, actor, delivery_id, accepted_at`

func scanEvent(r scanner) (storage.Event, error) {
	var e storage.Event
	var data string
	var parent sql.NullString
	var at int64
	err := r.Scan(&e.Seq, &e.ID, &e.Type, &e.Source, &e.Scope, &e.Work, &e.Execution, &e.CorrelationKey,
		&data, &parent, &e.Root, &e.Depth, &e.Actor, &e.DeliveryID, &at)
	if err != nil {
		return e, err
	}
	e.Data = json.RawMessage(data)
	e.Parent = strOf(parent)
	e.AcceptedAt = fromTS(at)
	return e, nil
}

func (q queries) GetEvent(ctx context.Context, id string) (storage.Event, error) {
	e, err := scanEvent(q.q.QueryRowContext(ctx, `SELECT `+eventCols+` FROM events WHERE id = ?`, id))
	return e, one(err, "event", id)
}

func (q queries) GetEventBySeq(ctx context.Context, seq int64) (storage.Event, error) {
	e, err := scanEvent(q.q.QueryRowContext(ctx, `SELECT `+eventCols+` FROM events WHERE seq = ?`, seq))
	return e, one(err, "event seq", fmt.Sprint(seq))
}

func (q queries) GetEventByDelivery(ctx context.Context, source, deliveryID string) (storage.Event, error) {
	e, err := scanEvent(q.q.QueryRowContext(ctx,
		`SELECT `+eventCols+` FROM events WHERE source = ? AND delivery_id = ? AND delivery_id <> ''`, source, deliveryID))
	return e, one(err, "event delivery", source+"/"+deliveryID)
}

func (q queries) ListEvents(ctx context.Context, p *storage.ListEventsParams) ([]storage.Event, error) {
	var w where
	w.eq("scope", p.Scope)
	w.eq("work", p.Work)
	w.eq("execution", p.Execution)
	w.eq("type", p.Type)
	w.eq("root", p.Root)
	w.eq("correlation_key", p.CorrelationKey)
	// Redundant with the equalities above, these let SQLite use the
	// partial indexes events_work and events_key, which it cannot prove
	// usable from a bound value alone.
	if p.Work != "" {
		w.add("work <> ''")
	}
	if p.CorrelationKey != "" {
		w.add("correlation_key <> ''")
	}
	if p.UntilSeq > 0 {
		w.add("seq <= ?", p.UntilSeq)
	}
	order := " ORDER BY seq"
	if p.Desc {
		order = " ORDER BY seq DESC"
		if p.AfterSeq > 0 {
			w.add("seq < ?", p.AfterSeq)
		}
	} else if p.AfterSeq > 0 {
		w.add("seq > ?", p.AfterSeq)
	}
	query := `SELECT ` + eventCols + ` FROM events` + w.sql() + order + fmt.Sprintf(" LIMIT %d", storage.EffectiveLimit(p.Limit))
	rows, err := q.q.QueryContext(ctx, query, w.args...)
	return collect(rows, err, scanEvent)
}

func (q queries) FindEvent(ctx context.Context, p *storage.FindEventParams) (storage.Event, error) {
	if len(p.Keys) == 0 {
		return storage.Event{}, fmt.Errorf("%w: no keys to find an event by", storage.ErrNotFound)
	}
	var w where
	w.add("scope = ?", p.Scope)
	w.add("seq > ?", p.AfterSeq)
	w.in("correlation_key", p.Keys)
	w.in("type", p.Types)
	e, err := scanEvent(q.q.QueryRowContext(ctx, `SELECT `+eventCols+` FROM events`+w.sql()+` ORDER BY seq LIMIT 1`, w.args...))
	return e, one(err, "event matching", strings.Join(p.Keys, ","))
}

func (q queries) LastSeq(ctx context.Context) (int64, error) {
	var n int64
	if err := q.q.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events`).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: last seq: %w", err)
	}
	return n, nil
}

func (q queries) GetCausalRoot(ctx context.Context, root string) (storage.CausalRoot, error) {
	var r storage.CausalRoot
	var ws, pa int64
	err := q.q.QueryRowContext(ctx, `SELECT root, max_depth, per_minute, window_start, window_count, pinned_at FROM causal_roots WHERE root = ?`, root).
		Scan(&r.Root, &r.MaxDepth, &r.PerMinute, &ws, &r.WindowCount, &pa)
	r.WindowStart, r.PinnedAt = fromTS(ws), fromTS(pa)
	return r, one(err, "causal root", root)
}

// ---- work ----

const workCols = `id, scope, binding, state, blocked_reason, blocked_detail, parent, created_event, outcome_message, outcome_data, grants, input_watermark, input_count, attempts, revision, created_at, updated_at, wait_reason`

func scanWork(r scanner) (storage.Work, error) {
	var row workRow
	if err := r.Scan(row.dest()...); err != nil {
		return row.w, err
	}
	return row.record()
}

// workRow is where a statement's workCols are scanned to (dest) and what
// turns them into the record (record), so that a statement that reads a
// Work with other columns scans them all at once.
type workRow struct {
	w                storage.Work
	parent, outcome  sql.NullString
	grants           string
	created, updated int64
}

func (r *workRow) dest() []any {
	w := &r.w
	return []any{&w.ID, &w.Scope, &w.Binding, &w.State, &w.BlockedReason, &w.BlockedDetail, &r.parent, &w.CreatedEvent,
		&w.OutcomeMessage, &r.outcome, &r.grants, &w.InputWatermark, &w.InputCount, &w.Attempts, &w.Revision, &r.created, &r.updated, &w.WaitReason}
}

func (r *workRow) record() (storage.Work, error) {
	w := r.w
	w.Parent = strOf(r.parent)
	if r.outcome.Valid {
		w.OutcomeData = json.RawMessage(r.outcome.String)
	}
	var err error
	if w.Grants, err = parseList(r.grants); err != nil {
		return w, err
	}
	w.CreatedAt, w.UpdatedAt = fromTS(r.created), fromTS(r.updated)
	return w, nil
}

func (q queries) GetWork(ctx context.Context, id string) (storage.Work, error) {
	w, err := scanWork(q.q.QueryRowContext(ctx, `SELECT `+workCols+` FROM work WHERE id = ?`, id))
	return w, one(err, "work", id)
}

func (q queries) ListWork(ctx context.Context, p *storage.ListWorkParams) ([]storage.Work, error) {
	var w where
	w.eq("scope", p.Scope)
	w.eq("state", string(p.State))
	w.eq("parent", p.Parent)
	w.eq("binding", p.Binding)
	tail := w.page(p.Page)
	rows, err := q.q.QueryContext(ctx, `SELECT `+workCols+` FROM work`+w.sql()+tail, w.args...)
	return collect(rows, err, scanWork)
}

func (q queries) ListClaimable(ctx context.Context, limit int) ([]storage.Work, error) {
	rows, err := q.q.QueryContext(ctx, `SELECT `+workCols+` FROM work w
		WHERE state = 'ready' AND blocked_reason = ''
		  AND NOT EXISTS (SELECT 1 FROM executions e WHERE e.work = w.id AND e.state IN ('running', 'stopping'))
		ORDER BY created_at, id LIMIT ?`, storage.EffectiveLimit(limit))
	return collect(rows, err, scanWork)
}

func (q queries) GetKeyOwner(ctx context.Context, scope, key string) (storage.Work, error) {
	w, err := scanWork(q.q.QueryRowContext(ctx, `SELECT `+prefixed("w.", workCols)+` FROM work_keys k JOIN work w ON w.id = k.work
		WHERE k.scope = ? AND k.key = ? AND k.released_at IS NULL`, scope, key))
	return w, one(err, "owner of key", key)
}

func prefixed(prefix, cols string) string {
	parts := strings.Split(cols, ", ")
	for i, p := range parts {
		parts[i] = prefix + p
	}
	return strings.Join(parts, ", ")
}

func scanString(r scanner) (string, error) {
	var s string
	return s, r.Scan(&s)
}

func (q queries) ListWorkKeys(ctx context.Context, workID string) ([]string, error) {
	rows, err := q.q.QueryContext(ctx, `SELECT key FROM work_keys WHERE work = ? AND released_at IS NULL ORDER BY key`, workID)
	keys, err := collect(rows, err, scanString)
	if keys == nil && err == nil {
		keys = []string{}
	}
	return keys, err
}

func (q queries) ListKeysEverOwned(ctx context.Context, workID string) ([]string, error) {
	rows, err := q.q.QueryContext(ctx, `SELECT DISTINCT key FROM work_keys WHERE work = ? ORDER BY key`, workID)
	keys, err := collect(rows, err, scanString)
	if keys == nil && err == nil {
		keys = []string{}
	}
	return keys, err
}

func scanInput(r scanner) (storage.Input, error) {
	var in storage.Input
	var at int64
	err := r.Scan(&in.Work, &in.Position, &in.Event, &at)
	in.QueuedAt = fromTS(at)
	return in, err
}

func (q queries) ListInputs(ctx context.Context, p *storage.ListInputsParams) ([]storage.Input, error) {
	var w where
	w.add("work = ?", p.Work)
	w.add("position > ?", p.AfterPosition)
	if p.UntilPosition > 0 {
		w.add("position <= ?", p.UntilPosition)
	}
	rows, err := q.q.QueryContext(ctx, `SELECT work, position, event, queued_at FROM work_inputs`+w.sql()+
		fmt.Sprintf(" ORDER BY position LIMIT %d", storage.EffectiveLimit(p.Limit)), w.args...)
	return collect(rows, err, scanInput)
}

// ---- executions ----

const execCols = `id, work, scope, binding, executor, generation, epoch, owner, lease_expires_at, deadline, state, input_watermark, result, message, exit_code, launched_epoch, session, node, ` +
	`usage_input_tokens, usage_output_tokens, usage_cache_read_tokens, usage_cache_creation_tokens, usage_cost_usd, usage_turns, revision, created_at, updated_at`

func scanExecution(r scanner) (storage.Execution, error) {
	var row execRow
	err := r.Scan(row.dest()...)
	return row.record(), err
}

// execRow is workRow for execCols.
type execRow struct {
	e                                 storage.Execution
	lease, deadline, created, updated int64
	exit                              sql.NullInt64
	in, out, cacheRead, cacheCreation sql.NullInt64
	turns                             sql.NullInt64
	cost                              sql.NullFloat64
}

func (r *execRow) dest() []any {
	e := &r.e
	return []any{&e.ID, &e.Work, &e.Scope, &e.Binding, &e.Executor, &e.Generation, &e.Epoch, &e.Owner, &r.lease, &r.deadline,
		&e.State, &e.InputWatermark, &e.Result, &e.Message, &r.exit, &e.LaunchedEpoch, &e.Session, &e.Node,
		&r.in, &r.out, &r.cacheRead, &r.cacheCreation, &r.cost, &r.turns, &e.Revision, &r.created, &r.updated}
}

func (r *execRow) record() storage.Execution {
	e := r.e
	if r.exit.Valid {
		code := int(r.exit.Int64)
		e.ExitCode = &code
	}
	// The usage columns are set together: NULL until a segment reported
	// usage.
	if r.in.Valid {
		e.Usage = &storage.Usage{InputTokens: r.in.Int64, OutputTokens: r.out.Int64, CacheReadTokens: r.cacheRead.Int64,
			CacheCreationTokens: r.cacheCreation.Int64, CostUSD: r.cost.Float64, Turns: r.turns.Int64}
	}
	e.LeaseExpiresAt, e.Deadline = fromTS(r.lease), fromTS(r.deadline)
	e.CreatedAt, e.UpdatedAt = fromTS(r.created), fromTS(r.updated)
	return e
}

func (q queries) GetExecution(ctx context.Context, id string) (storage.Execution, error) {
	e, err := scanExecution(q.q.QueryRowContext(ctx, `SELECT `+execCols+` FROM executions WHERE id = ?`, id))
	return e, one(err, "execution", id)
}

func (q queries) ListExecutions(ctx context.Context, p *storage.ListExecutionsParams) ([]storage.Execution, error) {
	var w where
	w.eq("work", p.Work)
	w.eq("scope", p.Scope)
	w.eq("binding", p.Binding)
	w.in("state", stateStrings(p.States))
	w.in("result", stateStrings(p.Results))
	if !p.CreatedFrom.IsZero() {
		w.add("created_at >= ?", ts(p.CreatedFrom))
	}
	w.eq("owner", p.Owner)
	if p.NotOwner != "" {
		w.add("owner <> ?", p.NotOwner)
	}
	w.in("node", p.Nodes)
	if !p.LeaseExpiredBy.IsZero() {
		w.add("lease_expires_at <= ?", ts(p.LeaseExpiredBy))
	}
	tail := w.page(p.Page)
	rows, err := q.q.QueryContext(ctx, `SELECT `+execCols+` FROM executions`+w.sql()+tail, w.args...)
	return collect(rows, err, scanExecution)
}

func (q queries) GetLiveExecution(ctx context.Context, workID string) (storage.Execution, error) {
	e, err := scanExecution(q.q.QueryRowContext(ctx, `SELECT `+execCols+` FROM executions WHERE work = ? AND state <> 'finished'`, workID))
	return e, one(err, "live execution of work", workID)
}

func (q queries) CountLeased(ctx context.Context, owner string) (int, error) {
	var n int
	err := q.q.QueryRowContext(ctx, `SELECT COUNT(*) FROM executions WHERE owner = ? AND state IN ('running', 'stopping')`, owner).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("sqlite: count leased: %w", err)
	}
	return n, nil
}

const declCols = `execution, epoch, kind, payload, declared_at, applied_at, disposition`

func scanDeclaration(r scanner) (storage.Declaration, error) {
	var d storage.Declaration
	var payload string
	var declared int64
	var applied sql.NullInt64
	err := r.Scan(&d.Execution, &d.Epoch, &d.Kind, &payload, &declared, &applied, &d.Disposition)
	d.Payload = json.RawMessage(payload)
	d.DeclaredAt, d.AppliedAt = fromTS(declared), nullTS(applied)
	return d, err
}

func (q queries) GetDeclaration(ctx context.Context, executionID string, epoch int64) (storage.Declaration, error) {
	d, err := scanDeclaration(q.q.QueryRowContext(ctx, `SELECT `+declCols+` FROM declarations WHERE execution = ? AND epoch = ?`, executionID, epoch))
	return d, one(err, "declaration of", fmt.Sprintf("%s epoch %d", executionID, epoch))
}

func (q queries) GetPendingDeclaration(ctx context.Context, executionID string) (storage.Declaration, error) {
	d, err := scanDeclaration(q.q.QueryRowContext(ctx, `SELECT `+declCols+` FROM declarations WHERE execution = ? AND applied_at IS NULL`, executionID))
	return d, one(err, "pending declaration of", executionID)
}

// callGuardQuery is GetCallGuard's one statement: the execution joined
// to its Work (by its primary key), whether it has a pending declaration
// (the partial index declarations_pending), the latest generation's
// number (the last key of config_generations), whether its Work has an
// active wait (waits_active) and whether it has a token not yet revoked
// (toolbelt_tokens_execution).
var callGuardQuery = `SELECT ` + prefixed("e.", execCols) + `, ` + prefixed("w.", workCols) + `,
	EXISTS (SELECT 1 FROM declarations d WHERE d.execution = e.id AND d.applied_at IS NULL),
	COALESCE((SELECT MAX(number) FROM config_generations), 0),
	EXISTS (SELECT 1 FROM waits a WHERE a.work = w.id AND a.state = 'active'),
	EXISTS (SELECT 1 FROM toolbelt_tokens t WHERE t.execution = e.id AND t.revoked_at = 0),
	COALESCE((SELECT k.work FROM work_keys k WHERE k.scope = w.scope AND k.key = w.id AND k.released_at IS NULL), ''),
	EXISTS (SELECT 1 FROM wait_keys k JOIN waits a ON a.id = k.wait WHERE k.key = w.id AND a.scope = w.scope AND a.state = 'active')
	FROM executions e JOIN work w ON w.id = e.work WHERE e.id = ?`

func (q queries) GetCallGuard(ctx context.Context, executionID string) (storage.CallGuard, error) {
	var g storage.CallGuard
	var e execRow
	var w workRow
	dest := append(append(e.dest(), w.dest()...), &g.Declared, &g.LatestGeneration, &g.ActiveWait, &g.LiveTokens, &g.KeyOwner, &g.KeyWaits)
	if err := one(q.q.QueryRowContext(ctx, callGuardQuery, executionID).Scan(dest...), "execution", executionID); err != nil {
		return g, err
	}
	g.Execution = e.record()
	var err error
	g.Work, err = w.record()
	return g, err
}

// ---- waits and timers ----

const waitCols = `id, work, scope, execution, epoch, registration, types, keys, on_work_keys, watermark, timer, timeout_at, state, satisfied_by, created_at, updated_at`

func scanWait(r scanner) (storage.Wait, error) {
	var w storage.Wait
	var exe, timer, satisfied sql.NullString
	var types, keys string
	var timeout, created, updated int64
	err := r.Scan(&w.ID, &w.Work, &w.Scope, &exe, &w.Epoch, &w.Registration, &types, &keys, &w.OnWorkKeys, &w.Watermark,
		&timer, &timeout, &w.State, &satisfied, &created, &updated)
	if err != nil {
		return w, err
	}
	w.Execution, w.Timer, w.SatisfiedBy = strOf(exe), strOf(timer), strOf(satisfied)
	if w.Types, err = parseList(types); err != nil {
		return w, err
	}
	if w.Keys, err = parseList(keys); err != nil {
		return w, err
	}
	w.TimeoutAt, w.CreatedAt, w.UpdatedAt = fromTS(timeout), fromTS(created), fromTS(updated)
	return w, nil
}

func (q queries) GetWait(ctx context.Context, id string) (storage.Wait, error) {
	w, err := scanWait(q.q.QueryRowContext(ctx, `SELECT `+waitCols+` FROM waits WHERE id = ?`, id))
	return w, one(err, "wait", id)
}

func (q queries) GetActiveWait(ctx context.Context, workID string) (storage.Wait, error) {
	w, err := scanWait(q.q.QueryRowContext(ctx, `SELECT `+waitCols+` FROM waits WHERE work = ? AND state = 'active'`, workID))
	return w, one(err, "active wait of work", workID)
}

func (q queries) ListWaits(ctx context.Context, p *storage.ListWaitsParams) ([]storage.Wait, error) {
	var w where
	w.eq("work", p.Work)
	w.eq("scope", p.Scope)
	w.eq("state", string(p.State))
	tail := w.page(p.Page)
	rows, err := q.q.QueryContext(ctx, `SELECT `+waitCols+` FROM waits`+w.sql()+tail, w.args...)
	return collect(rows, err, scanWait)
}

func (q queries) ListActiveWaitsByKey(ctx context.Context, scope, key string) ([]storage.Wait, error) {
	rows, err := q.q.QueryContext(ctx, `SELECT `+prefixed("w.", waitCols)+` FROM wait_keys k JOIN waits w ON w.id = k.wait
		WHERE k.key = ? AND w.scope = ? AND w.state = 'active' ORDER BY w.created_at, w.id`, key, scope)
	return collect(rows, err, scanWait)
}

func scanTimer(r scanner) (storage.Timer, error) {
	var t storage.Timer
	var due, created int64
	var fired sql.NullInt64
	err := r.Scan(&t.ID, &t.Kind, &t.Target, &due, &fired, &created)
	t.DueAt, t.FiredAt, t.CreatedAt = fromTS(due), nullTS(fired), fromTS(created)
	return t, err
}

func (q queries) GetTimer(ctx context.Context, id string) (storage.Timer, error) {
	t, err := scanTimer(q.q.QueryRowContext(ctx, `SELECT id, kind, target, due_at, fired_at, created_at FROM timers WHERE id = ?`, id))
	return t, one(err, "timer", id)
}

func (q queries) ListDueTimers(ctx context.Context, now time.Time, limit int) ([]storage.Timer, error) {
	rows, err := q.q.QueryContext(ctx, `SELECT id, kind, target, due_at, fired_at, created_at FROM timers
		WHERE fired_at IS NULL AND due_at <= ? ORDER BY due_at, id LIMIT ?`, ts(now), storage.EffectiveLimit(limit))
	return collect(rows, err, scanTimer)
}

// ---- artifacts ----

const artifactCols = `id, execution, work, name, media_type, size, sha256, created_at`

func scanArtifact(r scanner) (storage.Artifact, error) {
	var a storage.Artifact
	var created int64
	err := r.Scan(&a.ID, &a.Execution, &a.Work, &a.Name, &a.MediaType, &a.Size, &a.SHA256, &created)
	a.CreatedAt = fromTS(created)
	return a, err
}

func (q queries) GetArtifact(ctx context.Context, id string) (storage.Artifact, error) {
	a, err := scanArtifact(q.q.QueryRowContext(ctx, `SELECT `+artifactCols+` FROM artifacts WHERE id = ?`, id))
	return a, one(err, "artifact", id)
}

func (q queries) ListArtifacts(ctx context.Context, p *storage.ListArtifactsParams) ([]storage.Artifact, error) {
	var w where
	w.eq("execution", p.Execution)
	w.eq("work", p.Work)
	tail := w.page(p.Page)
	rows, err := q.q.QueryContext(ctx, `SELECT `+artifactCols+` FROM artifacts`+w.sql()+tail, w.args...)
	return collect(rows, err, scanArtifact)
}

// GetArtifactChunk finds nothing: SQLite keeps artifact bytes as files.
func (q queries) GetArtifactChunk(_ context.Context, id string, seq int64) ([]byte, error) {
	return nil, fmt.Errorf("%w: chunk %d of artifact %s (sqlite keeps artifact bytes as files)", storage.ErrNotFound, seq, id)
}
