package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/bootstrap"
	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/scheduler"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// generations is a configSource holding several generations.
type generations struct {
	active int64
	snaps  map[int64]*config.Snapshot
}

func (g *generations) Active() *config.Snapshot { return g.snaps[g.active] }
func (g *generations) Snapshot(_ context.Context, n int64) (*config.Snapshot, error) {
	if s, ok := g.snaps[n]; ok {
		return s, nil
	}
	return nil, fmt.Errorf("no generation %d", n)
}
func (g *generations) OnApply(func(*config.Snapshot)) {}

func secretsConfig(t *testing.T, secrets map[string]string, selected map[string]string) *config.Snapshot {
	t.Helper()
	doc := map[string]any{
		"version": 1,
		"secrets": secrets,
		"scopes": map[string]any{"s": map[string]any{
			"bindings": map[string]any{"b": map[string]any{
				"executor": "shell", "config": map[string]any{"command": []string{"true"}}, "secrets": selected,
			}},
		}},
	}
	b, _ := json.Marshal(doc)
	snap, res := config.Validate(b, bootstrap.ReleaseRegistry())
	if snap == nil {
		t.Fatalf("test config: %+v", res.Diagnostics)
	}
	return snap
}

func TestSecretsResolveOnlyWhatBothGenerationsGrant(t *testing.T) {
	env := map[string]string{"V_A": "alpha", "V_B": "beta", "V_C": "gamma", "V_A2": "alpha-two"}
	pinned := secretsConfig(t,
		map[string]string{"a": "env:V_A", "b": "env:V_B", "c": "env:V_C"},
		map[string]string{"A": "a", "B": "b", "C": "c"})
	current := secretsConfig(t,
		// a moved to another reference; b is no longer selected; c is
		// selected under another variable; d is new.
		map[string]string{"a": "env:V_A2", "b": "env:V_B", "c": "env:V_C", "d": "env:V_A"},
		map[string]string{"A": "a", "C2": "c", "D": "d"})
	pinned.Generation, current.Generation = 1, 2
	sr := &secretResolver{
		cfg:      &generations{active: 2, snaps: map[int64]*config.Snapshot{1: pinned, 2: current}},
		resolver: &config.Resolver{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }},
	}
	got, err := sr.resolve(context.Background(), scheduler.SecretsRequest{ScopeID: "s", BindingID: "b", Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"A": "alpha-two"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("resolved %v, want %v (only A is granted by both, with the active reference)", got, want)
	}
}

func TestSecretFailureNamesTheSecretOnly(t *testing.T) {
	snap := secretsConfig(t, map[string]string{"deploy": "env:OC_TEST_MISSING_REF"}, map[string]string{"TOKEN": "deploy"})
	snap.Generation = 1
	sr := &secretResolver{
		cfg:      &generations{active: 1, snaps: map[int64]*config.Snapshot{1: snap}},
		resolver: &config.Resolver{LookupEnv: func(string) (string, bool) { return "", false }},
	}
	_, err := sr.resolve(context.Background(), scheduler.SecretsRequest{ScopeID: "s", BindingID: "b", Generation: 1})
	var se *scheduler.SecretError
	if !errors.As(err, &se) || se.Name != "deploy" || se.Code == "" {
		t.Fatalf("error %v, want a SecretError naming deploy with a code", err)
	}
	if strings.Contains(err.Error(), "OC_TEST_MISSING_REF") {
		t.Errorf("error %q holds the reference", err)
	}
}

// A binding whose secret cannot be resolved holds its Work with
// secret_unavailable, naming the secret and never its reference; the
// command never starts.
func TestUnresolvableSecretHoldsTheWork(t *testing.T) {
	state := shortDir(t)
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	mark := filepath.Join(filepath.Dir(state), "ran")
	const ref = "OC_DAEMON_TEST_UNSET_9f2c"
	cfg := fmt.Sprintf(`{"version": 1, "secrets": {"deploy": "env:%s"}, "scopes": {"t": {"bindings": {"job": {
		"executor": "shell", "config": {"command": ["sh", "-c", "touch %s"]}, "secrets": {"TOKEN": "deploy"}}}}}}`, ref, mark)
	if err := os.WriteFile(filepath.Join(state, ConfigFile), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r := start(t, state)
	w := r.create("t", "job")
	w = r.until(w.ID, "held", func(w storage.Work) bool { return w.Held() })
	if w.BlockedReason != kernel.HoldSecretUnavailable || !strings.Contains(w.BlockedDetail, "deploy") {
		t.Fatalf("Work held %q: %q, want secret_unavailable naming deploy", w.BlockedReason, w.BlockedDetail)
	}
	for what, text := range map[string]string{"hold detail": w.BlockedDetail, "logs": r.logs.String()} {
		if strings.Contains(text, ref) {
			t.Errorf("the %s hold the secret reference", what)
		}
	}
	if exists(mark) {
		t.Error("the command ran without its secret")
	}
}
