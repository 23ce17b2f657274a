package daemon

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/sqlite"
)

// A toolbelt call held in flight across a shutdown (its extension handler
// blocks until released) still has its call record written, and nothing
// is logged as an ERROR: storage closes only once the call has returned.
func TestShutdownDrainsACallInFlight(t *testing.T) {
	state := shortDir(t)
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := `{"version": 1, "scopes": {"t": {
  "authorization": {"operations": ["hold.credential"]},
  "bindings": {"b": {"executor": "shell", "config": {"command": ["sh", "-c", "os call hold.credential"]}, "operations": ["hold.credential"]}}}}}`
	if err := os.WriteFile(filepath.Join(state, ConfigFile), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hold := extension.Registration{Name: "hold", Operations: []extension.Operation{{
		Name: "hold.credential", Summary: "Answer once released.", Capabilities: []string{"git.credential"},
		Handler: func(context.Context, extension.Authority, json.RawMessage) (json.RawMessage, error) {
			once.Do(func() { close(entered) })
			<-release
			return json.RawMessage(`{"username":"u","password":"p"}`), nil
		},
	}}}
	draining := make(chan struct{})
	r := start(t, state, func(o *Options) {
		o.Extensions = []extension.Registration{hold}
		o.draining = func() { close(draining) }
	})
	w := r.create("t", "b")
	select {
	case <-entered:
	case <-time.After(guard):
		t.Fatalf("the call never reached its handler:\n%s\n%s", r.logs, r.log(r.executions(w.ID)[0]))
	}
	exe := r.executions(w.ID)[0]
	r.cancel()
	// Release once shutdown waits for the call (or, without the drain,
	// once it has closed everything).
	select {
	case <-draining:
	case <-r.done:
		r.done <- nil
	case <-time.After(guard):
		t.Fatal("the daemon did not shut down")
	}
	close(release)
	r.stop()

	store, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(state, DatabaseFile), Clock: clock.System{}})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	calls, err := store.ListToolbeltCalls(context.Background(), &storage.ListToolbeltCallsParams{Execution: exe.ID})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range calls {
		found = found || c.Operation == "hold.credential"
	}
	if !found {
		t.Errorf("the call held across the shutdown has no record (records %+v)", calls)
	}
	for _, line := range strings.Split(r.logs.String(), "\n") {
		if strings.Contains(line, `"level":"ERROR"`) {
			t.Errorf("ERROR logged at shutdown: %s", line)
		}
	}
}

// A sweep cut off by shutdown (its context ended) is not an ERROR.
func TestSweepCutOffByShutdownIsNoError(t *testing.T) {
	r := start(t, shortDir(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r.d.sweep(ctx)
	logs := r.logs.String()
	if strings.Contains(logs, `"level":"ERROR"`) {
		t.Fatalf("a sweep cut off by shutdown logged an ERROR:\n%s", logs)
	}
	if !strings.Contains(logs, "cut off by shutdown") {
		t.Fatalf("the cut-off sweep is not reported:\n%s", logs)
	}
}
