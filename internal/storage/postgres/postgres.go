// Package postgres is the shared coordination store: storage.Store on a
// PostgreSQL database (through pgx and its pool), for several daemons that
// coordinate through one database. It keeps exactly the contract SQLite
// keeps (the storage conformance suite is run against both), with the
// numbered migrations embedded in migrations/ applied at open under an
// advisory lock, so that daemons starting at once migrate once.
//
// Within one Store, WithTx runs one write transaction at a time (the
// contract's serialised writes), and those queued together commit as one
// batch, each in a savepoint (group commit, group.go); across stores (other daemons) it relies
// on the database: every update is a compare-and-set that READ COMMITTED
// re-checks on the row's newest version after waiting for its lock, every
// uniqueness rule is an index that an INSERT ... ON CONFLICT DO NOTHING
// reports without aborting the transaction, and the event sequence is a
// counter row locked by the accepting transaction until it ends (see
// docs/storage.md). It is the daemons' storage.Watcher too: a committed
// generation is announced by NOTIFY in its own transaction, and each
// watcher LISTENs on a connection of its own outside the pool.
//
// It must never decide anything about Work or executions, never let an
// engine error other than the storage sentinels escape a fenced update,
// never import net/http, and never put the connection string (which may
// hold a password) in an error or a log. The clock it is given stamps
// applied migrations and times commits, nothing else.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"net"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/group"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Options configure Open.
type Options struct {
	// ConnString is a PostgreSQL connection string (URL or key=value
	// form). It may hold a password; the store never repeats it.
	ConnString string
	// Password, when set, is the password to connect with, in place of
	// one the connection string (or the environment) names: the daemon
	// resolves it from a secret reference so that it is never in a
	// command line, a file of the state directory or a log.
	Password string
	// Schema is the schema the store's tables live in (created if
	// missing). Empty: the connection's current schema (public by
	// default).
	Schema string
	// MaxConns bounds the pool (default 8): readers share it with the one
	// write transaction at a time.
	MaxConns int32
	// StatementCache is how many prepared statements each connection
	// keeps (default 512): the queries are fixed texts, and the few
	// built from optional filters have a bounded set of shapes.
	StatementCache int
	// Clock stamps applied migrations (required) and times commits.
	Clock clock.Clock
	// OnCommit, when set, is told how long each successful commit of a
	// write transaction took.
	OnCommit func(time.Duration)
	// After is the timer of the watcher's reconnection backoff (Watch);
	// time.After when nil.
	After func(time.Duration) <-chan time.Time
	// OnListen, when set, is told each time the watcher's connection is
	// established (nil) or lost (why, without the connection string).
	OnListen func(error)
}

// Store is storage.Store on PostgreSQL.
type Store struct {
	queries
	pool *pgxpool.Pool
	// group queues the write transactions (group.go).
	group  *group.Committer[*batch]
	clock  clock.Clock
	commit func(time.Duration)
	schema string
	// listen is the configuration of the watchers' own connections
	// (outside the pool); after and onListen are Options'.
	listen   *pgx.ConnConfig
	after    func(time.Duration) <-chan time.Time
	onListen func(error)
	// events keeps committed events, this daemon's and the others' it
	// has read, for every reader and transaction of the store (see
	// storage.EventCache).
	events *storage.EventCache
}

var _ storage.Store = (*Store)(nil)

// migrateLockClass is the first key of the advisory lock migrations take
// ("OC"); the second is a hash of the schema, so that stores of other
// schemas in the same database migrate independently.
const migrateLockClass = 0x4f43

// Open connects to the database, creates the schema if needed and applies
// the migrations it does not have yet.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if opts.ConnString == "" {
		return nil, errors.New("postgres: no connection string given")
	}
	if opts.Clock == nil {
		return nil, errors.New("postgres: Options need a Clock")
	}
	if opts.Schema != "" && !validIdent(opts.Schema) {
		return nil, errors.New("postgres: the schema name must be a lower-case identifier (a-z, 0-9, _; not starting with a digit)")
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = 8
	}
	if opts.StatementCache <= 0 {
		opts.StatementCache = 512
	}
	cfg, err := pgxpool.ParseConfig(opts.ConnString)
	if err != nil {
		// The parser's message may quote the string: say only that it is
		// not valid.
		return nil, errors.New("postgres: the connection string is not valid (see PostgreSQL's libpq connection strings)")
	}
	if opts.Password != "" {
		cfg.ConnConfig.Password = opts.Password
	}
	cfg.MaxConns = opts.MaxConns
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheStatement
	cfg.ConnConfig.StatementCacheCapacity = opts.StatementCache
	if opts.Schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = opts.Schema
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %s", connFailure(err))
	}
	s := &Store{pool: pool, clock: opts.Clock, commit: opts.OnCommit, schema: opts.Schema, events: storage.NewEventCache(),
		listen: cfg.ConnConfig.Copy(), after: opts.After, onListen: opts.OnListen}
	if s.after == nil {
		s.after = time.After
	}
	s.queries = queries{q: querier{c: pool}}
	s.group = s.newCommitter()
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// InlinePassword reports whether a connection string names a password
// itself (in a URL's user information or query, or as a password key of
// the key=value form).
func InlinePassword(conn string) bool {
	if strings.HasPrefix(conn, "postgres://") || strings.HasPrefix(conn, "postgresql://") {
		u, err := url.Parse(conn)
		if err != nil {
			return false
		}
		_, set := u.User.Password()
		return set || u.Query().Has("password")
	}
	return inlineKey.MatchString(conn)
}

var inlineKey = regexp.MustCompile(`(^|\s)password\s*=`)

// validIdent accepts the schema names the store quotes nowhere: plain
// lower-case identifiers.
func validIdent(s string) bool {
	if s == "" || len(s) > 63 || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// connFailure says why a connection failed without repeating the
// connection string, a user name or a password.
func connFailure(err error) string {
	var pe *pgconn.PgError
	var ne net.Error
	switch {
	case errors.As(err, &pe):
		return fmt.Sprintf("the server refused the connection (SQLSTATE %s)", pe.Code)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "connecting to the database timed out"
	case errors.Is(err, context.Canceled):
		return "connecting to the database was cancelled"
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ENOENT), errors.Is(err, os.ErrNotExist):
		return "nothing accepts connections at the database's address"
	}
	return "cannot connect to the database"
}

// Close closes the pool. It waits for a running transaction.
func (s *Store) Close() error {
	if !s.group.Close() {
		return nil
	}
	s.pool.Close()
	return nil
}

// SchemaVersion is the highest migration applied.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.pool.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("postgres: read the schema version: %s", engineMessage(err))
	}
	return v, nil
}

type migration struct {
	version int
	name    string
	sql     string
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
			return nil, fmt.Errorf("postgres: migration file %s is not named NNNN_name.sql", name)
		}
		v, err := strconv.Atoi(num)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("postgres: migration file %s has no positive number", name)
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("postgres: migrations %s and %s share number %d", other, name, v)
		}
		seen[v] = name
		body, err := fs.ReadFile(migrationFiles, "migrations/"+name)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: strings.TrimSuffix(rest, ".sql"), sql: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	return s.applyMigrations(ctx, ms)
}

// lockKey is the advisory lock's second key for schema.
func lockKey(schema string) int32 {
	h := fnv.New32a()
	h.Write([]byte(schema))
	return int32(h.Sum32())
}

// applyMigrations applies, in ascending order, every migration of ms the
// database has not recorded, each in its own transaction, holding a
// session advisory lock on the schema for the whole pass: a second store
// opening at the same time waits, then finds everything applied. It goes
// by the set of recorded versions, not by the highest one, so a migration
// numbered below one already applied is still applied, and exactly once.
// A database that records a version ms does not know was written by a
// newer release and is refused.
func (s *Store) applyMigrations(ctx context.Context, ms []migration) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: %s", connFailure(err))
	}
	defer conn.Release()
	schema := s.schema
	if schema == "" {
		var cur *string
		if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&cur); err != nil {
			return fmt.Errorf("postgres: read the current schema: %s", engineMessage(err))
		}
		if cur == nil {
			return errors.New("postgres: the connection has no current schema; name one in the store's options")
		}
		schema = *cur
	}
	key := lockKey(schema)
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, $2)`, int32(migrateLockClass), key); err != nil {
		return fmt.Errorf("postgres: take the migration lock: %s", engineMessage(err))
	}
	defer func() {
		// A failed unlock ends with the session; drop the connection so
		// that the pool never hands out one still holding the lock.
		if _, err := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1, $2)`, int32(migrateLockClass), key); err != nil {
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	if s.schema != "" {
		if _, err := conn.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+s.schema); err != nil {
			return fmt.Errorf("postgres: create schema %s: %s", s.schema, engineMessage(err))
		}
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at BIGINT  NOT NULL
	)`); err != nil {
		return fmt.Errorf("postgres: create schema_migrations: %s", engineMessage(err))
	}
	rows, err := conn.Query(ctx, `SELECT version FROM schema_migrations ORDER BY version`)
	var have []int32
	if err == nil {
		have, err = pgx.CollectRows(rows, pgx.RowTo[int32])
	}
	if err != nil {
		return fmt.Errorf("postgres: read schema versions: %s", engineMessage(err))
	}
	known := map[int]bool{}
	last := 0
	for _, m := range ms {
		known[m.version] = true
		last = max(last, m.version)
	}
	applied := map[int]bool{}
	for _, v := range have {
		if !known[int(v)] {
			return fmt.Errorf("postgres: the database has schema version %d, which this release does not know (it knows up to %d); it was written by a newer release, so run the newer release", v, last)
		}
		applied[int(v)] = true
	}
	for _, m := range ms {
		if applied[m.version] {
			continue
		}
		if err := applyMigration(ctx, conn.Conn(), m, s.clock.Now()); err != nil {
			return err
		}
	}
	return nil
}

func applyMigration(ctx context.Context, conn *pgx.Conn, m migration, at time.Time) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("postgres: migration %04d: %s", m.version, engineMessage(err))
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	// The simple protocol runs a file of several statements at once.
	if _, err := tx.Exec(ctx, m.sql, pgx.QueryExecModeSimpleProtocol); err != nil {
		return fmt.Errorf("postgres: migration %04d_%s: %s", m.version, m.name, engineMessage(err))
	}
	if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
		m.version, m.name, at.UnixNano()); err != nil {
		return fmt.Errorf("postgres: record migration %04d: %s", m.version, engineMessage(err))
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("postgres: migration %04d: %s", m.version, engineMessage(err))
	}
	return nil
}

// engineMessage renders an engine error without anything a statement's
// arguments put in it: the server's message (never its detail, which can
// quote a row's values) and its SQLSTATE.
func engineMessage(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return fmt.Sprintf("%s (SQLSTATE %s)", pe.Message, pe.Code)
	}
	return err.Error()
}

// ArtifactBlobs keeps artifact bytes in the database, in chunks
// (storage.ChunkBlobs), so that every daemon on it reads them; dir holds
// only bytes on their way in.
func (s *Store) ArtifactBlobs(dir string) (storage.Blobs, error) { return storage.ChunkBlobs(s, dir) }
