// Package sqlite is the embedded coordination store: storage.Store on one
// SQLite file in WAL mode, with exactly one writer connection (write
// transactions queue in-process for it, so the single writer never waits on
// SQLITE_BUSY, and the transactions queued together commit as one batch,
// each in its own savepoint: see group.go), a pool of query-only readers,
// busy_timeout, foreign keys, and the numbered migrations embedded in
// migrations/ applied at open.
//
// synchronous is FULL by default: in WAL mode NORMAL can lose the last
// committed transactions on power loss (the WAL is not synced at each
// commit), and the daemon promises that a committed record survives. The
// cost was measured (docs/performance.md) and is small next to everything
// else an acceptance does.
//
// It must never decide anything about Work or executions (that is the
// runtime's and the scheduler's job), and never let an
// engine error other than the storage sentinels escape a fenced update, and
// never answer a write transaction with nil before its batch's COMMIT has
// returned.
// The clock it is given stamps applied migrations and nothing else.
package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/group"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Options configure Open.
type Options struct {
	// Path of the database file. It is created if missing.
	Path string
	// Readers is the size of the reader pool (default 4).
	Readers int
	// BusyTimeout bounds how long a connection waits for a lock (default
	// 5s). Only checkpoints and other processes can make it wait.
	BusyTimeout time.Duration
	// Synchronous is FULL (default) or NORMAL.
	Synchronous string
	// Driver is the database/sql driver name (default "sqlite", the pure Go
	// modernc.org/sqlite). The driver comparison benchmark sets another.
	Driver string
	// Clock stamps applied migrations (required) and times commits.
	Clock clock.Clock
	// OnCommit, when set, is told how long each successful commit of a
	// write transaction took (the daemon's commit latency histogram): once
	// per batch of group commit, which is one COMMIT and one fsync.
	OnCommit func(time.Duration)
}

// Store is storage.Store on SQLite.
type Store struct {
	queries
	writer  *sql.DB
	readers *sql.DB
	// wconn is the writer's one connection, held from Open to Close:
	// batches begin and end on it by their own statements, and its
	// prepared statements (wstmts) are bound to it, so that a statement
	// in a batch costs neither a database/sql Tx's watch of its context
	// nor a re-binding of the statement to the transaction.
	wconn  *sql.Conn
	wstmts *stmtCache
	rstmts *stmtCache
	clock  clock.Clock
	commit func(time.Duration)

	// group queues the write transactions (group.go); batches counts
	// the batches committed: the writer's fsyncs.
	group   *group.Committer[*batch]
	batches atomic.Int64

	// events keeps committed events for every reader and transaction
	// of the store (see storage.EventCache).
	events *storage.EventCache
}

var _ storage.Store = (*Store)(nil)

// Open opens (creating if needed) the database at opts.Path and applies the
// migrations it does not have yet.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if opts.Path == "" {
		return nil, errors.New("sqlite: no database path given")
	}
	if strings.ContainsAny(opts.Path, "?#") {
		return nil, fmt.Errorf("sqlite: the database path %q contains '?' or '#'; choose a state directory without them", opts.Path)
	}
	if opts.Readers <= 0 {
		opts.Readers = 4
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = 5 * time.Second
	}
	switch strings.ToUpper(opts.Synchronous) {
	case "":
		opts.Synchronous = "FULL"
	case "FULL", "NORMAL":
		opts.Synchronous = strings.ToUpper(opts.Synchronous)
	default:
		return nil, fmt.Errorf("sqlite: synchronous must be FULL or NORMAL, not %q", opts.Synchronous)
	}
	if opts.Driver == "" {
		opts.Driver = driverName
	}
	if opts.Clock == nil {
		return nil, errors.New("sqlite: Options need a Clock")
	}

	q := url.Values{}
	q.Set("_busy_timeout", strconv.FormatInt(opts.BusyTimeout.Milliseconds(), 10))
	q.Set("_journal_mode", "WAL")
	q.Set("_foreign_keys", "1")
	q.Set("_synchronous", opts.Synchronous)
	q.Set("_txlock", "immediate")
	// Temporary files in memory: the sub-journal of each caller's savepoint
	// in a batch (the pages it changed, kept to roll it back alone)
	// otherwise spills to a temporary file past 64 KiB, and a batch then
	// writes each of those pages to disk once more than it commits.
	q.Set("_pragma", "temp_store(MEMORY)")
	writer, err := sql.Open(opts.Driver, opts.Path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", opts.Path, err)
	}
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	writer.SetConnMaxLifetime(0)
	writer.SetConnMaxIdleTime(0)
	// The writer creates the file and turns WAL on before readers open it.
	if err := writer.PingContext(ctx); err != nil {
		writer.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", opts.Path, err)
	}
	if err := migrate(ctx, writer, opts.Clock); err != nil {
		writer.Close()
		return nil, err
	}

	q.Del("_txlock")
	q.Del("_pragma")
	q.Set("_query_only", "1")
	readers, err := sql.Open(opts.Driver, opts.Path+"?"+q.Encode())
	if err != nil {
		writer.Close()
		return nil, fmt.Errorf("sqlite: open readers on %s: %w", opts.Path, err)
	}
	readers.SetMaxOpenConns(opts.Readers)
	readers.SetMaxIdleConns(opts.Readers)
	wconn, err := writer.Conn(ctx)
	if err != nil {
		readers.Close()
		writer.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", opts.Path, err)
	}
	s := &Store{writer: writer, readers: readers, wconn: wconn,
		wstmts: newStmtCache(wconn.PrepareContext), rstmts: newStmtCache(readers.PrepareContext),
		clock: opts.Clock, commit: opts.OnCommit, events: storage.NewEventCache()}
	s.queries = queries{q: poolQuerier{db: readers, c: s.rstmts}}
	s.group = s.newCommitter()
	return s, nil
}

// Close closes the connections. It refuses new transactions and waits for
// those already queued to end.
func (s *Store) Close() error {
	if !s.group.Close() {
		return nil
	}
	s.rstmts.close()
	s.wstmts.close()
	return errors.Join(s.readers.Close(), s.wconn.Close(), s.writer.Close())
}

// Pragma reads a PRAGMA value on the writer connection (for tests and
// diagnostics).
func (s *Store) Pragma(ctx context.Context, name string) (string, error) {
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r == '_') {
			return "", fmt.Errorf("sqlite: bad pragma name %q", name)
		}
	}
	// Read in a turn of its own, so that it never waits on the writer's
	// connection while a batch holds it.
	var v string
	err := s.WithTx(ctx, func(t storage.Tx) error {
		return t.(*tx).q.QueryRowContext(ctx, "PRAGMA "+name).Scan(&v)
	})
	return v, err
}

// SchemaVersion is the highest migration applied.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.readers.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}

type migration struct {
	version int
	name    string
	sql     string
	// noForeignKeys: the migration rebuilds tables that others reference,
	// so it runs with foreign keys off and checks them before its commit
	// (its first line is fkOffLine).
	noForeignKeys bool
}

// fkOffLine, as a migration's first line, runs it with foreign keys off:
// SQLite's procedure for a table rebuild (create, copy, drop, rename)
// needs them off, which can only be set outside a transaction.
const fkOffLine = "-- foreign_keys: off"

// newMigration is migration version of name with body sql.
func newMigration(version int, name, sql string) migration {
	first, _, _ := strings.Cut(sql, "\n")
	return migration{version: version, name: name, sql: sql, noForeignKeys: strings.TrimSpace(first) == fkOffLine}
}

// migrations lists the embedded migrations in order. Their file names are
// NNNN_name.sql; the numbers are unique and never reused.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	seen := map[int]string{}
	for _, e := range entries {
		name := e.Name()
		num, rest, ok := strings.Cut(name, "_")
		if !ok || !strings.HasSuffix(rest, ".sql") {
			return nil, fmt.Errorf("sqlite: migration file %s is not named NNNN_name.sql", name)
		}
		v, err := strconv.Atoi(num)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("sqlite: migration file %s has no positive number", name)
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("sqlite: migrations %s and %s share number %d", other, name, v)
		}
		seen[v] = name
		body, err := fs.ReadFile(migrationFiles, "migrations/"+name)
		if err != nil {
			return nil, err
		}
		out = append(out, newMigration(v, strings.TrimSuffix(rest, ".sql"), string(body)))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

func migrate(ctx context.Context, db *sql.DB, c clock.Clock) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	return applyMigrations(ctx, db, c, ms)
}

// applyMigrations applies, in ascending order, every migration of ms the
// database has not recorded, each in its own transaction. It goes by the
// set of recorded versions, not by the highest one, so a migration
// numbered below one already applied (the numbers leave gaps for that) is
// still applied, and exactly once. A database that records a version ms
// does not know was written by a newer release and is refused.
func applyMigrations(ctx context.Context, db *sql.DB, c clock.Clock, ms []migration) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	)`); err != nil {
		return fmt.Errorf("sqlite: create schema_migrations: %w", err)
	}
	have, err := appliedVersions(ctx, db)
	if err != nil {
		return err
	}
	known := map[int]bool{}
	last := 0
	for _, m := range ms {
		known[m.version] = true
		last = max(last, m.version)
	}
	for _, v := range have {
		if !known[v] {
			return fmt.Errorf("sqlite: the database has schema version %d, which this release does not know (it knows up to %d); it was written by a newer release, so run the newer release", v, last)
		}
	}
	for _, m := range ms {
		if err := applyMigration(ctx, db, m, c.Now()); err != nil {
			return err
		}
	}
	return nil
}

// appliedVersions lists the recorded migration versions.
func appliedVersions(ctx context.Context, db *sql.DB) ([]int, error) {
	rows, err := db.QueryContext(ctx, `SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: read schema versions: %w", err)
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("sqlite: read schema versions: %w", err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: read schema versions: %w", err)
	}
	return out, nil
}

func applyMigration(ctx context.Context, db *sql.DB, m migration, at time.Time) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sqlite: migration %04d: %w", m.version, err)
	}
	defer conn.Close()
	if m.noForeignKeys {
		var was int
		if err := conn.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&was); err != nil {
			return fmt.Errorf("sqlite: migration %04d: %w", m.version, err)
		}
		if _, err := conn.ExecContext(ctx, `PRAGMA foreign_keys = OFF`); err != nil {
			return fmt.Errorf("sqlite: migration %04d: %w", m.version, err)
		}
		// Whatever happens, the connection goes back to the pool with
		// foreign keys as they were; one that cannot be is not reused.
		defer func() {
			if _, err := conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA foreign_keys = `+strconv.Itoa(was)); err != nil {
				_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			}
		}()
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: migration %04d: %w", m.version, err)
	}
	defer tx.Rollback()
	// Checked inside the migration's own (immediate) transaction, so that
	// a migration is applied once even if another process opened the
	// file at the same time.
	var done int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, m.version).Scan(&done); err != nil {
		return fmt.Errorf("sqlite: migration %04d: %w", m.version, err)
	}
	if done > 0 {
		return nil
	}
	var dangling int
	if m.noForeignKeys {
		if dangling, err = danglingRows(ctx, tx); err != nil {
			return fmt.Errorf("sqlite: migration %04d_%s: %w", m.version, m.name, err)
		}
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return fmt.Errorf("sqlite: migration %04d_%s: %w", m.version, m.name, err)
	}
	if m.noForeignKeys {
		after, err := danglingRows(ctx, tx)
		if err == nil && after > dangling {
			err = fmt.Errorf("it would leave %d rows referencing rows that do not exist; the database is unchanged: report this with the release's version", after-dangling)
		}
		if err != nil {
			return fmt.Errorf("sqlite: migration %04d_%s: %w", m.version, m.name, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, ?)`,
		m.version, m.name, at.UnixNano()); err != nil {
		return fmt.Errorf("sqlite: record migration %04d: %w", m.version, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: migration %04d: %w", m.version, err)
	}
	return nil
}

// danglingRows counts the rows whose foreign keys reference a row that
// does not exist. A migration run with foreign keys off must not add any;
// rows a damaged database had before it are left as they were.
func danglingRows(ctx context.Context, tx *sql.Tx) (int, error) {
	rows, err := tx.QueryContext(ctx, `PRAGMA foreign_key_check`)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	return n, rows.Err()
}

// ArtifactBlobs keeps artifact bytes as files in dir, beside the
// database on the daemon's own disk.
func (s *Store) ArtifactBlobs(dir string) (storage.Blobs, error) { return storage.FileBlobs(dir) }
