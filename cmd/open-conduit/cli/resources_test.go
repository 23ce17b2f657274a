package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// serveStack starts the management server with every resource route on a
// real store and points the CLI's defaults at its state directory.
func serveStack(t *testing.T) *mgmttest.Stack {
	t.Helper()
	s := mgmttest.StartStack(t, mgmttest.StackOptions{})
	t.Setenv(EnvState, s.StateDir)
	t.Setenv(EnvEndpoint, "")
	t.Setenv(EnvTokenFile, "")
	return s
}

var workID = regexp.MustCompile(`wrk_[0-9a-z]+`)

// mustRun runs the CLI and fails unless it exits with want.
func mustRun(t *testing.T, want int, args ...string) string {
	t.Helper()
	code, out, errs := run(t, args...)
	if code != want {
		t.Fatalf("open-conduit %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, out, errs)
	}
	return out + errs
}

func TestWorkCommands(t *testing.T) {
	s := serveStack(t)
	out := mustRun(t, 0, "work", "create", "--scope", "setup", "--data", `{"ref":"main"}`, "--correlation-key", "deploy/main", "--idempotency-key", "c1")
	id := workID.FindString(out)
	if id == "" || !strings.Contains(out, "Created Work") || !strings.Contains(out, "binding shell") {
		t.Fatalf("create said %q", out)
	}
	// The same key finds the same Work.
	again := mustRun(t, 0, "work", "create", "--scope", "setup", "--data", `{"ref":"main"}`, "--correlation-key", "deploy/main", "--idempotency-key", "c1")
	if workID.FindString(again) != id || !strings.Contains(again, "earlier") {
		t.Errorf("second create with the same key said %q", again)
	}
	if out := mustRun(t, 1, "work", "create", "--scope", "setup", "--correlation-key", "deploy/other", "--idempotency-key", "c1"); !strings.Contains(out, "idempotency_conflict") {
		t.Errorf("changed request under a used key said %q", out)
	}
	if out := mustRun(t, 0, "work", "get", id); !strings.Contains(out, "ready") || !strings.Contains(out, "setup") {
		t.Errorf("get said %q", out)
	}
	if out := mustRun(t, 0, "work", "list", "--scope", "setup"); !strings.Contains(out, id) || !strings.Contains(out, "STATE") {
		t.Errorf("list said %q", out)
	}
	var page struct {
		Items []struct{ ID string } `json:"items"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, 0, "work", "list", "--json")), &page); err != nil || len(page.Items) != 1 || page.Items[0].ID != id {
		t.Errorf("list --json: %+v, %v", page, err)
	}
	if out := mustRun(t, 2, "work", "create", "--scope", "team"); !strings.Contains(out, "bindings") {
		t.Errorf("create in a scope with two bindings said %q", out)
	}
	mustRun(t, 2, "work", "create")
	mustRun(t, 2, "work", "create", "--scope", "setup", "--data", "not json")
	mustRun(t, 2, "work", "get")
	if out := mustRun(t, 1, "work", "get", "wrk_nope"); !strings.Contains(out, "not_found") {
		t.Errorf("get of an unknown Work said %q", out)
	}

	if out := mustRun(t, 0, "work", "cancel", id, "--reason", "testing", "--idempotency-key", "x1"); !strings.Contains(out, "cancelled") {
		t.Errorf("cancel said %q", out)
	}
	if out := mustRun(t, 0, "work", "cancel", id, "--reason", "testing", "--idempotency-key", "x1"); !strings.Contains(out, "earlier request") {
		t.Errorf("replayed cancel said %q", out)
	}
	if out := mustRun(t, 0, "work", "retry", id); !strings.Contains(out, "ready again") {
		t.Errorf("retry said %q", out)
	}
	if out := mustRun(t, 0, "work", "wake", id, "--data", `{"go":true}`); !strings.Contains(out, "matched no wait") {
		t.Errorf("wake of a Work that waits for nothing said %q", out)
	}

	exe := "exe_cli"
	err := s.Store.WithTx(context.Background(), func(tx storage.Tx) error {
		now := s.Clock.Now()
		running := storage.WorkRunning
		if _, err := tx.UpdateWork(context.Background(), &storage.UpdateWorkParams{ID: id, State: &running, Now: now}); err != nil {
			return err
		}
		_, err := tx.InsertExecution(context.Background(), &storage.InsertExecutionParams{ID: exe, Work: id, Scope: "setup", Binding: "shell",
			Executor: "shell", Generation: 1, Owner: "d", LeaseExpiresAt: now.Add(time.Minute), Deadline: now.Add(time.Hour), CreatedAt: now})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, 0, "executions", "list", "--work", id); !strings.Contains(out, exe) || !strings.Contains(out, "running") {
		t.Errorf("executions list said %q", out)
	}
	if out := mustRun(t, 0, "execution", "cancel", exe); !strings.Contains(out, "stopping") || !strings.Contains(out, "work retry "+id) {
		t.Errorf("execution cancel said %q", out)
	}
	if out := mustRun(t, 0, "executions", "get", exe); !strings.Contains(out, "stopping") {
		t.Errorf("executions get said %q", out)
	}
	if out := mustRun(t, 0, "waits", "--work", id); !strings.Contains(out, "STATE") {
		t.Errorf("waits said %q", out)
	}
	if out := mustRun(t, 0, "toolbelt", "calls"); !strings.Contains(out, "RESULT") {
		t.Errorf("toolbelt calls said %q", out)
	}
}

func TestEventCommands(t *testing.T) {
	serveStack(t)
	out := mustRun(t, 0, "emit", "note.added", "--scope", "setup", "--data", `{"text":"hi"}`)
	root := regexp.MustCompile(`evt_[0-9a-z]+`).FindString(out)
	if root == "" || !strings.Contains(out, "unmatched") {
		t.Fatalf("emit said %q", out)
	}
	out = mustRun(t, 0, "emit", "deploy.requested", "--parent", root)
	if !strings.Contains(out, "Started Work") {
		t.Fatalf("derived emit said %q", out)
	}
	if out := mustRun(t, 0, "events", "list", "--type", "deploy.requested"); !strings.Contains(out, "deploy.requested") || strings.Contains(out, "note.added") {
		t.Errorf("events list said %q", out)
	}
	chain := mustRun(t, 0, "events", "chain", root)
	if !strings.Contains(chain, "note.added") || !strings.Contains(chain, "  deploy.requested") || !strings.Contains(chain, "    core.work.created") {
		t.Errorf("chain said %q", chain)
	}
	if out := mustRun(t, 0, "events", "get", root); !strings.Contains(out, `{"text":"hi"}`) || !strings.Contains(out, "operator:local") {
		t.Errorf("events get said %q", out)
	}
	mustRun(t, 2, "emit", "a.b")
	if out := mustRun(t, 2, "emit", "core.manual", "--scope", "setup"); !strings.Contains(out, "invalid_request") {
		t.Errorf("core type said %q", out)
	}
	// Paging: one per page, with the next cursor on the error stream.
	code, out, errs := run(t, "events", "list", "--limit", "1")
	next := regexp.MustCompile(`--cursor (\S+)`).FindStringSubmatch(errs)
	if code != 0 || next == nil {
		t.Fatalf("events list --limit 1: %d %q %q", code, out, errs)
	}
	if out := mustRun(t, 0, "events", "list", "--limit", "1", "--cursor", next[1]); !strings.Contains(out, "deploy.requested") {
		t.Errorf("second page said %q", out)
	}
	if out := mustRun(t, 1, "events", "list", "--type", "x.y", "--cursor", next[1]); !strings.Contains(out, "cursor_mismatch") {
		t.Errorf("cursor with other filters said %q", out)
	}
}

func TestArtifactCommands(t *testing.T) {
	s := serveStack(t)
	ctx := context.Background()
	id := workID.FindString(mustRun(t, 0, "work", "create", "--scope", "setup"))
	err := s.Store.WithTx(ctx, func(tx storage.Tx) error {
		now := s.Clock.Now()
		_, err := tx.InsertExecution(ctx, &storage.InsertExecutionParams{ID: "exe_1", Work: id, Scope: "setup", Binding: "shell",
			Executor: "shell", Generation: 1, Owner: "d", LeaseExpiresAt: now, Deadline: now, CreatedAt: now})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Artifacts.Put(ctx, storage.Artifact{ID: "art_log", Execution: "exe_1", Work: id, Name: "log", MediaType: "text/plain", CreatedAt: s.Clock.Now()}, strings.NewReader("hello, world\n")); err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, 0, "artifacts", "list", "--work", id); !strings.Contains(out, "art_log") || !strings.Contains(out, "13") {
		t.Errorf("artifacts list said %q", out)
	}
	if out := mustRun(t, 0, "artifacts", "get", "art_log"); !strings.Contains(out, "text/plain") {
		t.Errorf("artifacts get said %q", out)
	}
	if code, out, _ := run(t, "artifacts", "cat", "art_log"); code != 0 || out != "hello, world\n" {
		t.Errorf("cat = %d %q", code, out)
	}
	for rng, want := range map[string]string{"0-4": "hello", "7-": "world\n", "-6": "world\n"} {
		if code, out, errs := run(t, "artifacts", "cat", "art_log", "--range", rng); code != 0 || out != want {
			t.Errorf("cat --range %s = %d %q %q, want %q", rng, code, out, errs, want)
		}
	}
	mustRun(t, 2, "artifacts", "cat", "art_log", "--range", "x")
	if out := mustRun(t, 1, "artifacts", "cat", "art_log", "--range", "50-"); !strings.Contains(out, "range_not_satisfiable") {
		t.Errorf("range past the end said %q", out)
	}
}

func TestConfigRemoteCommands(t *testing.T) {
	serveStack(t)
	out := mustRun(t, 0, "config", "get")
	if !strings.Contains(out, "generation") || !strings.Contains(out, "env:<redacted>") || strings.Contains(out, mgmttest.CanaryReference) {
		t.Fatalf("config get said %q", out)
	}
	other := strings.Replace(string(mgmttest.StackConfig), `"reads": ["work"]}`, `"reads": ["work", "events"]}`, 1)
	good, bad := cfgFile(t, other), cfgFile(t, cfgInvalid)
	if out := mustRun(t, 0, "config", "validate", good); !strings.Contains(out, "valid: hash ") {
		t.Errorf("validate good said %q", out)
	}
	if out := mustRun(t, 1, "config", "validate", bad); !strings.Contains(out, "invalid: 3 problems") || !strings.Contains(out, "unknown_field") {
		t.Errorf("validate bad said %q", out)
	}
	var v struct {
		Valid bool   `json:"valid"`
		Hash  string `json:"hash"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, 0, "config", "validate", good, "--json")), &v); err != nil || !v.Valid || v.Hash == "" {
		t.Errorf("validate --json: %+v %v", v, err)
	}
	if out := mustRun(t, 1, "config", "apply", bad); !strings.Contains(out, "unknown_field") || !strings.Contains(out, "was not applied") {
		t.Errorf("apply bad said %q", out)
	}
	if out := mustRun(t, 1, "config", "apply", good, "--expected-generation", "4"); !strings.Contains(out, "no longer generation 4") {
		t.Errorf("stale apply said %q", out)
	}
	if out := mustRun(t, 0, "config", "apply", good); !strings.Contains(out, "Applied: generation 2 (was 1)") {
		t.Errorf("apply said %q", out)
	}
	// The same document again makes no generation, and says so.
	if out := mustRun(t, 0, "config", "apply", good, "--expected-generation", "2"); !strings.Contains(out, "Unchanged: generation 2") {
		t.Errorf("apply of the active document said %q", out)
	}
	if out := mustRun(t, 0, "scopes"); !strings.Contains(out, "setup") || !strings.Contains(out, "shell (shell)") {
		t.Errorf("scopes said %q", out)
	}
	if out := mustRun(t, 0, "scopes", "setup"); !strings.Contains(out, "secret TOKEN") || !strings.Contains(out, "canary") || strings.Contains(out, mgmttest.CanaryReference) {
		t.Errorf("scopes setup said %q", out)
	}
	mustRun(t, 1, "scopes", "nope")
	mustRun(t, 1, "config", "validate", "/does/not/exist.json")
}

// TestWorkCreateWait follows a Work to its end: the command polls the
// Work while the test, standing in for the scheduler, finishes it.
func TestWorkCreateWait(t *testing.T) {
	s := serveStack(t)
	defer func(d time.Duration) { waitInterval = d }(waitInterval)
	waitInterval = 5 * time.Millisecond
	ctx := context.Background()

	cases := []struct {
		name   string
		finish func(id string) error
		code   int
		want   []string
	}{
		{"succeeded", func(id string) error {
			if err := s.Store.WithTx(ctx, func(tx storage.Tx) error {
				now := s.Clock.Now()
				_, err := tx.InsertExecution(ctx, &storage.InsertExecutionParams{ID: "exe_ok", Work: id, Scope: "setup", Binding: "shell",
					Executor: "shell", Generation: 1, Owner: "d", LeaseExpiresAt: now, Deadline: now, CreatedAt: now})
				return err
			}); err != nil {
				return err
			}
			if _, err := s.Artifacts.Put(ctx, storage.Artifact{ID: "art_ok", Execution: "exe_ok", Work: id, Name: "log", MediaType: "text/plain", CreatedAt: s.Clock.Now()}, strings.NewReader("done\n")); err != nil {
				return err
			}
			return s.Store.WithTx(ctx, func(tx storage.Tx) error {
				_, _, err := s.Runtime.FinishWorkInTx(ctx, tx, id, kernel.Finish{State: storage.WorkSucceeded, Message: "exit status 0"})
				return err
			})
		}, 0, []string{"succeeded", "open-conduit artifacts cat art_ok"}},
		{"failed", func(id string) error {
			return s.Store.WithTx(ctx, func(tx storage.Tx) error {
				_, _, err := s.Runtime.FinishWorkInTx(ctx, tx, id, kernel.Finish{State: storage.WorkFailed, Message: "exit status 3"})
				return err
			})
		}, 1, []string{"failed", "exit status 3", "artifacts list --work"}},
		{"held", func(id string) error {
			return s.Store.WithTx(ctx, func(tx storage.Tx) error {
				_, err := s.Runtime.HoldInTx(ctx, tx, id, kernel.HoldSecretUnavailable, "secret canary is unavailable")
				return err
			})
		}, 1, []string{"held", "secret_unavailable", "work retry"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := countWork(t, s)
			var wg sync.WaitGroup
			var code int
			var out, errs bytes.Buffer
			wg.Go(func() {
				code = Main(ctx, []string{"work", "create", "--scope", "setup", "--wait"}, Streams{In: strings.NewReader(""), Out: &out, Err: &errs})
			})
			id := awaitNewWork(t, s, before)
			if err := tc.finish(id); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			all := out.String() + errs.String()
			if code != tc.code {
				t.Fatalf("exit %d, want %d: %s", code, tc.code, all)
			}
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("output lacks %q: %s", w, all)
				}
			}
		})
	}
}

func countWork(t *testing.T, s *mgmttest.Stack) int {
	t.Helper()
	list, err := s.Store.ListWork(context.Background(), &storage.ListWorkParams{Page: storage.Page{Limit: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

// awaitNewWork waits until the command running in the background has
// created its Work (an external event), with a generous bound.
func awaitNewWork(t *testing.T, s *mgmttest.Stack, before int) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		list, err := s.Store.ListWork(context.Background(), &storage.ListWorkParams{Page: storage.Page{Limit: 1000}})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) > before {
			// Every earlier case's Work has ended or is held: the new one
			// is the only ready one.
			for _, w := range list {
				if w.State == storage.WorkReady && w.BlockedReason == "" {
					return w.ID
				}
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("the command created no Work")
	return ""
}

func TestRouteCommand(t *testing.T) {
	serveStack(t)
	out := mustRun(t, 0, "route", "--scope", "setup", "--trace", "deploy.requested")
	if !strings.Contains(out, "deploys") || !strings.Contains(out, "match") || !strings.Contains(out, "effect: start") {
		t.Errorf("trace said %q", out)
	}
	if out := mustRun(t, 0, "route", "--scope", "setup", "--trace", "note.added", "--data", `{"a":1}`); !strings.Contains(out, "effect: unmatched") || !strings.Contains(out, "skip") {
		t.Errorf("unmatched trace said %q", out)
	}
	if out := mustRun(t, 0, "route", "--scope", "setup", "--samples"); !strings.Contains(out, "no sample") {
		t.Errorf("samples said %q", out)
	}
	mustRun(t, 2, "route", "--scope", "setup")
	mustRun(t, 2, "route", "--trace", "a.b")
	mustRun(t, 2, "route", "--scope", "setup", "--trace", "a.b", "--samples")
	if out := mustRun(t, 2, "route", "--scope", "setup", "--trace", "core.work.created"); !strings.Contains(out, "invalid_request") {
		t.Errorf("trace of a core type said %q", out)
	}
	if out := mustRun(t, 0, "events", "list"); strings.Contains(out, "deploy.requested") {
		t.Errorf("a trace recorded an event: %q", out)
	}
}
