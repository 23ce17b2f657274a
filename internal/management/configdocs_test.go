package management_test

import (
	"bytes"
	"testing"

	"github.com/open-conduit/open-conduit/internal/bootstrap"
	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
)

// The configuration documents the config route tests apply (the
// configuration service's own tests, in package configsvc, use the same).

func hashOf(t *testing.T, doc []byte) string {
	t.Helper()
	snap, res := config.Validate(doc, bootstrap.ReleaseRegistry())
	if !res.Valid() {
		t.Fatalf("test document does not validate: %v", res.Diagnostics)
	}
	return snap.Hash
}

// configWith returns StackConfig with a different team scope.
func configWith(team string) []byte {
	return bytes.Replace(mgmttest.StackConfig, []byte(`"team": {
      "parent": "setup",`), []byte(team), 1)
}

var (
	// otherConfig differs from StackConfig only in the team scope's reads.
	otherConfig = bytes.Replace(mgmttest.StackConfig, []byte(`"reads": ["work"]}`), []byte(`"reads": ["work", "events"]}`), 1)
	// noTeam removes the team scope (a tombstone).
	noTeam = configWith(`"team": {"removed": true}, "unused": {`)
)
