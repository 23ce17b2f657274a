package sqlite_test

import (
	"context"
	"testing"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/sqlite"
)

// Migration 0075 gives every execution an agent session and usage totals:
// a row an earlier release wrote reads with neither, and takes both from
// its next update on the real file.
func TestMigrationSessionUsageOfEarlierRows(t *testing.T) {
	ctx := context.Background()
	path, db := earlierRelease(t, 75)
	if _, err := db.ExecContext(ctx, `INSERT INTO executions (id, work, scope, binding, executor, generation, epoch, owner,
		lease_expires_at, deadline, state, input_watermark, result, message, exit_code, created_at, updated_at)
		VALUES ('exe_old', 'wrk_old', 's1', 'b1', 'shell', 1, 1, 'd', 0, 0, 'running', 0, '', '', NULL, 0, 0)`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, err := sqlite.Open(ctx, sqlite.Options{Path: path, Clock: clock.System{}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.GetExecution(ctx, "exe_old")
	if err != nil || e.Session != "" || e.Usage != nil {
		s.Close()
		t.Fatalf("an earlier row after 0075 = session %q usage %+v (%v), want none", e.Session, e.Usage, err)
	}
	session, usage := "sess-old", &storage.Usage{InputTokens: 9, Turns: 1, CostUSD: 0.01}
	if err := s.WithTx(ctx, func(tx storage.Tx) error {
		_, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: "exe_old", Epoch: 1, Session: &session, AddUsage: usage})
		return err
	}); err != nil {
		s.Close()
		t.Fatal(err)
	}
	s.Close()
	s, err = sqlite.Open(ctx, sqlite.Options{Path: path, Clock: clock.System{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, err = s.GetExecution(ctx, "exe_old")
	if err != nil || e.Session != session || e.Usage == nil || *e.Usage != *usage {
		t.Fatalf("after an update and a reopen: session %q usage %+v (%v), want %q %+v", e.Session, e.Usage, err, session, usage)
	}
}
