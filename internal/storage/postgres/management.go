package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// The management API's records: operator credentials (digest only),
// Idempotency-Key history, configuration generations, scope records and
// host keys (in migration 0001, as SQLite's 0030).

var (
	_ storage.ManagementReader = queries{}
	_ storage.ManagementTx     = (*tx)(nil)
)

const credentialCols = `id, name, role, digest, created_at, revoked_at`

func scanCredential(r scanner) (storage.Credential, error) {
	var c storage.Credential
	var created, revoked int64
	err := r.Scan(&c.ID, &c.Name, &c.Role, &c.Digest, &created, &revoked)
	c.CreatedAt, c.RevokedAt = fromTS(created), fromTS(revoked)
	return c, err
}

func (q queries) GetCredential(ctx context.Context, id string) (storage.Credential, error) {
	c, err := scanCredential(q.q.queryRow(ctx, `SELECT `+credentialCols+` FROM operator_credentials WHERE id = ?`, id))
	return c, one(err, "credential", id)
}

func (q queries) GetCredentialByDigest(ctx context.Context, digest []byte) (storage.Credential, error) {
	c, err := scanCredential(q.q.queryRow(ctx, `SELECT `+credentialCols+` FROM operator_credentials WHERE digest = ?`, digest))
	// Never name the digest in an error.
	return c, one(err, "credential", "with that digest")
}

func (q queries) GetActiveCredential(ctx context.Context, name string) (storage.Credential, error) {
	c, err := scanCredential(q.q.queryRow(ctx, `SELECT `+credentialCols+` FROM operator_credentials WHERE name = ? AND revoked_at = 0`, name))
	return c, one(err, "active credential of", name)
}

func (q queries) ListCredentials(ctx context.Context, p *storage.ListCredentialsParams) ([]storage.Credential, error) {
	var w where
	if p.Active {
		w.add("revoked_at = 0")
	}
	tail := w.page(p.Page)
	rows, err := q.q.query(ctx, `SELECT `+credentialCols+` FROM operator_credentials`+w.sql()+tail, w.args...)
	out, err := collect(rows, err, scanCredential)
	if out == nil && err == nil {
		out = []storage.Credential{}
	}
	return out, err
}

func (q queries) GetIdempotency(ctx context.Context, principal, key string) (storage.IdempotencyRecord, error) {
	var rec storage.IdempotencyRecord
	var created int64
	err := q.q.queryRow(ctx, `SELECT principal, key, method, path, body_hash, status, body, created_at
		FROM idempotency_records WHERE principal = ? AND key = ?`, principal, key).
		Scan(&rec.Principal, &rec.Key, &rec.Method, &rec.Path, &rec.BodyHash, &rec.Status, &rec.Body, &created)
	rec.CreatedAt = fromTS(created)
	// The key is the caller's own; the principal names who sent it.
	return rec, one(err, "idempotency record of", principal)
}

const generationCols = `number, hash, normalized, actor, created_at`

func scanGeneration(r scanner) (storage.Generation, error) {
	var g storage.Generation
	var normalized string
	var created int64
	err := r.Scan(&g.Number, &g.Hash, &normalized, &g.Actor, &created)
	g.Normalized, g.CreatedAt = []byte(normalized), fromTS(created)
	return g, err
}

func (q queries) GetGeneration(ctx context.Context, number int64) (storage.Generation, error) {
	g, err := scanGeneration(q.q.queryRow(ctx, `SELECT `+generationCols+` FROM config_generations WHERE number = ?`, number))
	return g, one(err, "configuration generation", fmt.Sprint(number))
}

func (q queries) LatestGeneration(ctx context.Context) (storage.Generation, error) {
	g, err := scanGeneration(q.q.queryRow(ctx, `SELECT `+generationCols+` FROM config_generations ORDER BY number DESC LIMIT 1`))
	return g, one(err, "configuration generation", "(none committed)")
}

const scopeCols = `id, parent, enabled, removed, active, bindings, routes, generation, updated_at`

func scanScopeRecord(r scanner) (storage.ScopeRecord, error) {
	var s storage.ScopeRecord
	var bindings, routes string
	var updated int64
	if err := r.Scan(&s.ID, &s.Parent, &s.Enabled, &s.Removed, &s.Active, &bindings, &routes, &s.Generation, &updated); err != nil {
		return s, err
	}
	var err error
	if s.Bindings, err = parseList(bindings); err != nil {
		return s, err
	}
	if s.Routes, err = parseList(routes); err != nil {
		return s, err
	}
	s.UpdatedAt = fromTS(updated)
	return s, nil
}

func (q queries) ListScopeRecords(ctx context.Context) ([]storage.ScopeRecord, error) {
	rows, err := q.q.query(ctx, `SELECT `+scopeCols+` FROM config_scopes ORDER BY id`)
	out, err := collect(rows, err, scanScopeRecord)
	if out == nil && err == nil {
		out = []storage.ScopeRecord{}
	}
	return out, err
}

func (q queries) CountWork(ctx context.Context, scope string, states []storage.WorkState) (int, error) {
	var w where
	w.add("scope = ?", scope)
	w.in("state", stateStrings(states))
	var n int
	if err := q.q.queryRow(ctx, `SELECT COUNT(*) FROM work`+w.sql(), w.args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: count work: %s", engineMessage(err))
	}
	return n, nil
}

func (q queries) GetHostKey(ctx context.Context, name string) (storage.HostKey, error) {
	var k storage.HostKey
	var created int64
	err := q.q.queryRow(ctx, `SELECT name, value, created_at FROM host_keys WHERE name = ?`, name).Scan(&k.Name, &k.Value, &created)
	k.CreatedAt = fromTS(created)
	return k, one(err, "host key", name)
}

func (t *tx) InsertCredential(ctx context.Context, c *storage.Credential) error {
	if c.ID == "" || c.Name == "" || len(c.Digest) == 0 {
		return fmt.Errorf("postgres: a credential needs an id, a name and a digest")
	}
	ok, err := t.insert(ctx, "insert credential", `INSERT INTO operator_credentials (`+credentialCols+`) VALUES (?, ?, ?, ?, ?, ?)`,
		c.ID, c.Name, c.Role, c.Digest, ts(c.CreatedAt), ts(c.RevokedAt))
	if err != nil || ok {
		return err
	}
	if dup, err := t.exists(ctx, `SELECT 1 FROM operator_credentials WHERE id = ? OR digest = ?`, c.ID, c.Digest); err != nil {
		return err
	} else if dup {
		return fmt.Errorf("%w: credential %s exists", storage.ErrDuplicate, c.ID)
	}
	return fmt.Errorf("%w: operator %s already has an active credential", storage.ErrDuplicate, c.Name)
}

func (t *tx) RevokeCredential(ctx context.Context, id string, at time.Time) error {
	if at.IsZero() {
		return fmt.Errorf("postgres: revoking credential %s needs a time", id)
	}
	tag, err := t.q.exec(ctx, `UPDATE operator_credentials SET revoked_at = ? WHERE id = ? AND revoked_at = 0`, ts(at), id)
	if err != nil {
		return writeErr(err, "revoke credential")
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	ok, err := t.exists(ctx, `SELECT 1 FROM operator_credentials WHERE id = ?`, id)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: credential %s", storage.ErrNotFound, id)
	}
	return nil
}

func (t *tx) PutIdempotency(ctx context.Context, rec *storage.IdempotencyRecord) error {
	body := rec.Body
	if body == nil {
		body = []byte{}
	}
	// Nothing reads the outcome: the record travels with the next
	// statement, or after the caller's turn (see batch.Release).
	err := t.q.later(ctx, `INSERT INTO idempotency_records (principal, key, method, path, body_hash, status, body, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (principal, key) DO UPDATE SET method = excluded.method, path = excluded.path, body_hash = excluded.body_hash,
			status = excluded.status, body = excluded.body, created_at = excluded.created_at`,
		rec.Principal, rec.Key, rec.Method, rec.Path, rec.BodyHash, rec.Status, body, ts(rec.CreatedAt))
	return writeErr(err, "put idempotency record")
}

func (t *tx) DeleteIdempotencyBefore(ctx context.Context, before time.Time) (int, error) {
	tag, err := t.q.exec(ctx, `DELETE FROM idempotency_records WHERE created_at < ?`, ts(before))
	if err != nil {
		return 0, writeErr(err, "sweep idempotency records")
	}
	return int(tag.RowsAffected()), nil
}

func (t *tx) InsertGeneration(ctx context.Context, g *storage.Generation) error {
	if g.Number < 1 || g.Hash == "" {
		return fmt.Errorf("postgres: a generation needs a number from 1 and a hash")
	}
	if dup, err := t.exists(ctx, `SELECT 1 FROM config_generations WHERE number = ?`, g.Number); err != nil {
		return err
	} else if dup {
		return fmt.Errorf("%w: generation %d exists", storage.ErrDuplicate, g.Number)
	}
	// Another daemon may commit the same number at once: the insert
	// below then finds it taken (ErrDuplicate), never a gap.
	var last int64
	if err := t.q.queryRow(ctx, `SELECT COALESCE(MAX(number), 0) FROM config_generations`).Scan(&last); err != nil {
		return fmt.Errorf("postgres: read the last generation: %s", engineMessage(err))
	}
	if g.Number != last+1 {
		return fmt.Errorf("%w: generation %d is not the next after %d", storage.ErrFenced, g.Number, last)
	}
	normalized := string(g.Normalized)
	if normalized == "" {
		normalized = "{}"
	}
	ok, err := t.insert(ctx, "insert generation", `INSERT INTO config_generations (`+generationCols+`) VALUES (?, ?, ?, ?, ?)`,
		g.Number, g.Hash, normalized, g.Actor, ts(g.CreatedAt))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: generation %d exists", storage.ErrDuplicate, g.Number)
	}
	// Every daemon on the store hears of it, once it committed
	// (PostgreSQL delivers a notification only then; a rollback drops
	// it). The payload is the schema, so that stores of other schemas in
	// the same database pass it over.
	if _, err := t.q.exec(ctx, `SELECT pg_notify(?, current_schema())`, channel(storage.TopicConfig)); err != nil {
		return fmt.Errorf("postgres: announce generation %d: %s", g.Number, engineMessage(err))
	}
	return nil
}

func (t *tx) PutScopeRecord(ctx context.Context, r *storage.ScopeRecord) error {
	if r.ID == "" {
		return fmt.Errorf("postgres: a scope record needs an id")
	}
	_, err := t.q.exec(ctx, `INSERT INTO config_scopes (`+scopeCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET parent = excluded.parent, enabled = excluded.enabled, removed = excluded.removed,
			active = excluded.active, bindings = excluded.bindings, routes = excluded.routes,
			generation = excluded.generation, updated_at = excluded.updated_at`,
		r.ID, r.Parent, r.Enabled, r.Removed, r.Active, jsonList(r.Bindings), jsonList(r.Routes), r.Generation, ts(r.UpdatedAt))
	return writeErr(err, "put scope record")
}

func (t *tx) InsertHostKey(ctx context.Context, k *storage.HostKey) error {
	if k.Name == "" || len(k.Value) == 0 {
		return fmt.Errorf("postgres: a host key needs a name and a value")
	}
	ok, err := t.insert(ctx, "insert host key", `INSERT INTO host_keys (name, value, created_at) VALUES (?, ?, ?)`, k.Name, k.Value, ts(k.CreatedAt))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: host key %s exists", storage.ErrDuplicate, k.Name)
	}
	return nil
}
