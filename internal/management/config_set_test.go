package management_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/configsvc"
	"github.com/open-conduit/open-conduit/internal/management"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
)

// TestConfigSetRoute: POST /v1/config/set changes one member and applies
// it (admin, Idempotency-Key, expected generation); the saved document
// keeps its secret reference, which no answer holds; a pointer that
// cannot be set is invalid_request and an invalid result invalid_config,
// neither echoing the value.
func TestConfigSetRoute(t *testing.T) {
	ctx := context.Background()
	s := mgmttest.StartStack(t, mgmttest.StackOptions{})
	c := s.Client
	reads := []byte(`["work", "events"]`)

	if _, err := c.SetConfig(ctx, "/scopes/team/authorization/reads", reads, 5, nil); !client.IsStaleGeneration(err) {
		t.Fatalf("set with a stale generation: %v", err)
	}
	_, err := c.SetConfig(ctx, "/scopes/nobody/authorization/reads", []byte(`"OC_VALUE_CANARY"`), 1, nil)
	if !client.IsInvalidRequest(err) || !strings.Contains(err.Error(), "/scopes/nobody does not exist") || strings.Contains(err.Error(), "OC_VALUE_CANARY") {
		t.Fatalf("set under a missing scope: %v", err)
	}
	_, err = c.SetConfig(ctx, "/scopes/team/authorization/reads", []byte(`["OC_VALUE_CANARY"]`), 1, nil)
	if !client.IsInvalidConfig(err) || len(client.Diagnostics(err)) == 0 || strings.Contains(err.Error(), "OC_VALUE_CANARY") {
		t.Fatalf("set of an invalid value: %v (%+v)", err, client.Diagnostics(err))
	}
	viewFile, _ := s.AddOperator(t, "viewer", management.RoleView)
	if _, err := s.ClientFor(viewFile).SetConfig(ctx, "/scopes/team/authorization/reads", reads, 1, nil); !client.IsForbiddenRole(err) {
		t.Fatalf("view set: %v", err)
	}

	set, err := c.SetConfig(ctx, "/scopes/team/authorization/reads", reads, 1, keyed("set-1"))
	if err != nil || set.Generation != 2 || set.PreviousGeneration != 1 || set.Hash != hashOf(t, otherConfig) || set.Warnings == nil {
		t.Fatalf("set = %+v, %v", set, err)
	}
	if again, err := c.SetConfig(ctx, "/scopes/team/authorization/reads", reads, 1, keyed("set-1")); err != nil || !again.Replayed || again.Generation != 2 {
		t.Fatalf("replayed set = %+v, %v", again, err)
	}
	if sc, _ := c.Scope(ctx, "team", nil); sc.Generation != 2 || !slices.Equal(sc.Authorization.Reads, []string{"work", "events"}) {
		t.Errorf("team after set = %+v", sc.Authorization)
	}
	saved, err := os.ReadFile(filepath.Join(s.StateDir, configsvc.ConfigFileName))
	if err != nil || !bytes.Contains(saved, []byte("env:"+mgmttest.CanaryReference)) {
		t.Fatalf("the saved document lost its secret reference: %s %v", saved, err)
	}
	if bytes.Contains(set.Raw, []byte(mgmttest.CanaryReference)) {
		t.Errorf("the answer holds the secret reference: %s", set.Raw)
	}
}
