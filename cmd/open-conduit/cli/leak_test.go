package cli

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/open-conduit/open-conduit/internal/storage/postgres/pgtest"
)

// TestMain fails the package's tests when any of them leaves a goroutine
// running, and stops the throwaway PostgreSQL cluster if a test started
// one.
func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Wrap(m)) }
