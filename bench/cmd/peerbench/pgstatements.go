package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5"
)

// The statement count of -pg-statements: the cluster loads
// pg_stat_statements, and after the first round's one-daemon run the
// statements its database ran are read back and printed per Work, most
// called first. It shows where a Work's statements go without any
// counter in the daemon.

// statementRow is one normalised statement of pg_stat_statements.
type statementRow struct {
	calls  int64
	rows   int64
	meanMs float64
	query  string
}

// readStatements returns the statements database db ran, most called
// first; adminConn is a connection string of another database of the
// cluster, in which the extension is created.
func readStatements(ctx context.Context, adminConn, db string) ([]statementRow, error) {
	conn, err := pgx.Connect(ctx, adminConn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		return nil, fmt.Errorf("pg_stat_statements: %w", err)
	}
	rows, err := conn.Query(ctx, `SELECT s.calls, s.rows, s.mean_exec_time, s.query
		FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
		WHERE d.datname = $1 ORDER BY s.calls DESC, s.query`, db)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (statementRow, error) {
		var s statementRow
		err := r.Scan(&s.calls, &s.rows, &s.meanMs, &s.query)
		return s, err
	})
}

// reportStatements prints the top statements of rs per Work of a round of
// n Work, and their total.
func reportStatements(w io.Writer, rs []statementRow, n, top int) {
	var total int64
	for _, r := range rs {
		total += r.calls
	}
	fmt.Fprintf(w, "\nStatements of the first round's one daemon (pg_stat_statements): %.1f per Work in all; the %d most called:\n\n", float64(total)/float64(n), min(top, len(rs)))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "per Work\trows/call\tmean ms\tstatement")
	for i, r := range rs {
		if i == top {
			break
		}
		q := strings.Join(strings.Fields(r.query), " ")
		if len(q) > 140 {
			q = q[:140] + "…"
		}
		rowsPer := 0.0
		if r.calls > 0 {
			rowsPer = float64(r.rows) / float64(r.calls)
		}
		fmt.Fprintf(tw, "%.2f\t%.1f\t%.3f\t%s\n", float64(r.calls)/float64(n), rowsPer, r.meanMs, q)
	}
	tw.Flush()
}
