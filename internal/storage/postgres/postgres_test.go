package postgres_test

import (
	"context"
	"os"
	"testing"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/postgres"
	"github.com/open-conduit/open-conduit/internal/storage/postgres/pgtest"
	"github.com/open-conduit/open-conduit/internal/storage/storagetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// openSchema opens a store on schema of the binary's cluster, closed when
// the test ends.
func openSchema(t testing.TB, c *pgtest.Cluster, schema string) (*postgres.Store, error) {
	s, err := postgres.Open(context.Background(), postgres.Options{ConnString: c.ConnString("postgres"), Schema: schema, Clock: clock.System{}})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { s.Close() })
	return s, nil
}

// engine is the PostgreSQL store as the conformance suite opens it: a
// fresh schema per case, opened again on the same schema when a case
// reopens it.
var engine = storagetest.Engine{Name: "postgres", Fresh: func(t *testing.T) func() (storage.Store, error) {
	c := pgtest.Require(t)
	schema := c.FreshSchema()
	return func() (storage.Store, error) { return openSchema(t, c, schema) }
}}

// TestConformance runs the whole storage contract against PostgreSQL,
// reopened where a case proves persistence.
func TestConformance(t *testing.T) {
	storagetest.ExerciseEngine(t, engine)
}

// TestConformanceNegativeControls runs every case against the deliberately
// wrong store it names: each must fail it.
func TestConformanceNegativeControls(t *testing.T) {
	storagetest.CheckNegativeControls(t, engine)
}
