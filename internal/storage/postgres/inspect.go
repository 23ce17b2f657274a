package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Schema is what Inspect found of a store's schema.
type Schema struct {
	// Applied are the migrations the database records, ascending.
	Applied []int
	// Known are the migrations this release embeds, ascending.
	Known []int
	// Pending are the known migrations not applied (Open applies them).
	Pending []int
	// Unknown are the applied migrations this release does not know: the
	// database was written by a newer release, and Open refuses it.
	Unknown []int
}

// Inspect connects to the database with opts (ConnString, Password,
// Schema), reads which migrations it records and compares them with this
// release's, changing nothing: no schema is created and no migration is
// applied. Its errors, like Open's, never repeat the connection string,
// a user name or a password.
func Inspect(ctx context.Context, opts Options) (Schema, error) {
	var out Schema
	ms, err := migrations()
	if err != nil {
		return out, err
	}
	for _, m := range ms {
		out.Known = append(out.Known, m.version)
	}
	if opts.ConnString == "" {
		return out, errors.New("postgres: no connection string given")
	}
	if opts.Schema != "" && !validIdent(opts.Schema) {
		return out, errors.New("postgres: the schema name must be a lower-case identifier (a-z, 0-9, _; not starting with a digit)")
	}
	cfg, err := pgx.ParseConfig(opts.ConnString)
	if err != nil {
		return out, errors.New("postgres: the connection string is not valid (see PostgreSQL's libpq connection strings)")
	}
	if opts.Password != "" {
		cfg.Password = opts.Password
	}
	if opts.Schema != "" {
		cfg.RuntimeParams["search_path"] = opts.Schema
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return out, fmt.Errorf("postgres: %s", connFailure(err))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT version FROM schema_migrations ORDER BY version`)
	var have []int32
	if err == nil {
		have, err = pgx.CollectRows(rows, pgx.RowTo[int32])
	}
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == "42P01":
		// No schema_migrations: a database no store opened yet.
	case err != nil:
		return out, fmt.Errorf("postgres: read schema versions: %s", engineMessage(err))
	}
	known := map[int]bool{}
	for _, v := range out.Known {
		known[v] = true
	}
	applied := map[int]bool{}
	for _, v := range have {
		out.Applied = append(out.Applied, int(v))
		applied[int(v)] = true
		if !known[int(v)] {
			out.Unknown = append(out.Unknown, int(v))
		}
	}
	for _, v := range out.Known {
		if !applied[v] {
			out.Pending = append(out.Pending, v)
		}
	}
	return out, nil
}
