package scheduler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/executor/shell"
	"github.com/open-conduit/open-conduit/internal/ids"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/scheduler"
	"github.com/open-conduit/open-conduit/internal/scheduler/schedulertest"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/sqlite"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
)

// TestMain doubles as the shell executor's supervisor: the shell tests'
// executor starts this test binary as `<binary> supervise <dir>`, as the
// daemon starts `open-conduit supervise <dir>`.
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == "supervise" {
		code := 0
		if err := shell.Supervise(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
		// Not os.Exit: under -race it waits a second for the detector's
		// report at every segment's end.
		syscall.Exit(code)
	}
	goleak.VerifyTestMain(m)
}

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

var operator = kernel.WithActor(context.Background(), "operator:ann")

// tokens records the issuer calls and hands out numbered tokens.
type tokens struct {
	mu    sync.Mutex
	calls []toolbelt.TokenRequest
	eps   []string
	fail  bool
}

func (tk *tokens) Issue(_ context.Context, req toolbelt.TokenRequest) (string, error) {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	if tk.fail {
		return "", errors.New("issuer down")
	}
	tk.calls = append(tk.calls, req)
	return "tok-" + req.ExecutionID + "-" + req.Reason, nil
}

func (tk *tokens) endpoints(_ context.Context, executionID, token string) (scheduler.Endpoint, error) {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	tk.eps = append(tk.eps, executionID+" "+token)
	return scheduler.Endpoint{Socket: "/run/" + executionID + "/toolbelt.sock", TokenFile: "/run/" + executionID + "/token/token"}, nil
}

func (tk *tokens) snapshot() ([]toolbelt.TokenRequest, []string) {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	return append([]toolbelt.TokenRequest(nil), tk.calls...), append([]string(nil), tk.eps...)
}

// tb is what the harness needs of a test (a *testing.T or a *rapid.T).
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

type harness struct {
	t       tb
	path    string
	dir     string
	clock   *clock.Fake
	ids     *ids.Generator
	store   storage.Store
	rt      *kernel.Runtime
	ctl     *kernel.Control
	s       *scheduler.Scheduler
	plain   *schedulertest.Executor
	resumer *schedulertest.Executor
	silent  *schedulertest.Executor
	dirless *schedulertest.Executor
	routes  kernel.RouteTable
	tokens  *tokens
	arts    *storage.Artifacts
	mod     func(*scheduler.Options)
	wrap    func(storage.Store) storage.Store
	owner   string
}

func newHarness(t *testing.T, mod func(*scheduler.Options)) *harness {
	t.Helper()
	h := buildHarness(t, t.TempDir(), mod, nil)
	t.Cleanup(h.close)
	return h
}

// buildHarness opens a harness in dir; wrap, when set, wraps the store.
func buildHarness(t tb, dir string, mod func(*scheduler.Options), wrap func(storage.Store) storage.Store) *harness {
	t.Helper()
	c := clock.NewFake(t0)
	h := &harness{
		t: t, dir: dir, path: filepath.Join(dir, "state.db"), clock: c,
		ids:     ids.NewGenerator(c, rand.NewChaCha8([32]byte{7})),
		plain:   schedulertest.New(executor.Info{Name: "plain", Transport: executor.TransportOS, Capabilities: []executor.Capability{executor.CapToolbelt}}),
		resumer: schedulertest.New(executor.Info{Name: "resumer", Transport: executor.TransportOS, Capabilities: []executor.Capability{executor.CapToolbelt, executor.CapResume}}),
		silent:  schedulertest.New(executor.Info{Name: "silent", Transport: executor.TransportNone}),
		dirless: schedulertest.New(executor.Info{Name: "dirless", Transport: executor.TransportNone, Dirless: true}),
		routes:  kernel.RouteTable{}, tokens: &tokens{}, mod: mod, wrap: wrap, owner: "daemon-1",
	}
	h.open()
	return h
}

func (h *harness) open() {
	t := h.t
	t.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Options{Path: h.path, Clock: clock.System{}})
	if err != nil {
		t.Fatal(err)
	}
	h.store = s
	if h.wrap != nil {
		h.store = h.wrap(s)
	}
	h.rt, err = kernel.New(kernel.Options{Clock: h.clock, IDs: h.ids, Routes: h.routes})
	if err != nil {
		t.Fatal(err)
	}
	extra := kernel.BindingView{Grants: []string{"extra"}}
	h.ctl = kernel.NewControl(kernel.ControlOptions{Runtime: h.rt, Store: h.store, Scopes: kernel.ScopeTable{
		"s1": {Active: true, Bindings: map[string]kernel.BindingView{"b1": extra, "br": extra, "bn": extra, "bd": extra, "bs": extra, "bi": extra, "bp": extra}},
	}})
	h.arts, err = storage.NewArtifacts(h.store, filepath.Join(h.dir, "artifacts"))
	if err != nil {
		t.Fatal(err)
	}
	opts := scheduler.Options{
		Store: h.store, Runtime: h.rt, Owner: h.owner,
		Limits:    scheduler.Limits{MaxRunning: 4, Lease: 30 * time.Second, AttemptTimeout: time.Hour},
		Executors: map[string]executor.Executor{"plain": h.plain, "resumer": h.resumer, "silent": h.silent, "dirless": h.dirless},
		Bindings: func(_ context.Context, q scheduler.BindingQuery) (scheduler.Binding, error) {
			exec := map[string]string{"b1": "plain", "br": "resumer", "bn": "silent", "bd": "dirless"}[q.Binding]
			if exec == "" {
				return scheduler.Binding{}, errors.New("no such binding")
			}
			return scheduler.Binding{Executor: exec, Config: json.RawMessage(`{"binding":"` + q.Binding + `"}`), Generation: 1}, nil
		},
		Toolbelt: h.tokens, ToolbeltEndpoints: h.tokens.endpoints, ToolbeltDir: "/opt/oc/bin", PlaybookDir: "/state/playbooks",
		ExecutionsDir: filepath.Join(h.dir, "executions"), Artifacts: h.arts,
		Logger: slog.New(slog.DiscardHandler),
	}
	if h.mod != nil {
		h.mod(&opts)
	}
	h.s, err = scheduler.New(opts)
	if err != nil {
		t.Fatal(err)
	}
}

func (h *harness) close() {
	if h.s != nil {
		h.s.Close()
		h.s = nil
	}
	if h.store != nil {
		h.store.Close()
		h.store = nil
	}
}

// restart stops the scheduler (its executor calls detach, as at a daemon
// shutdown), closes the database and opens both again under owner.
func (h *harness) restart(owner string) {
	h.close()
	h.owner = owner
	h.open()
}

func (h *harness) tick() {
	h.t.Helper()
	if err := h.s.Tick(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	h.s.WaitPrepared(context.Background())
	// As the daemon does when a preparation ends: claim again what waited
	// for its binding's turn, until nothing more is claimed.
	for {
		n, err := h.s.Claim(context.Background())
		if err != nil {
			h.t.Fatal(err)
		}
		h.s.WaitPrepared(context.Background())
		if n == 0 {
			return
		}
	}
}

// finish ends a segment and applies its result.
func (h *harness) finish(seg *schedulertest.Segment, res executor.Result) {
	h.t.Helper()
	seg.Finish(res)
	h.settle(seg)
	h.tick()
}

// settle waits until the scheduler queued the segment's result.
func (h *harness) settle(seg *schedulertest.Segment) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.s.WaitSegment(ctx, seg.Req.ExecutionID, seg.Req.Epoch); err != nil {
		h.t.Fatalf("segment %s@%d did not report: %v", seg.Req.ExecutionID, seg.Req.Epoch, err)
	}
}

// waitEpoch waits until the scheduler's call for the execution at epoch
// reported.
func (h *harness) waitEpoch(executionID string, epoch int64) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.s.WaitSegment(ctx, executionID, epoch); err != nil {
		h.t.Fatalf("%s@%d did not report: %v", executionID, epoch, err)
	}
}

func (h *harness) create(binding string, keys ...string) storage.Work {
	h.t.Helper()
	res, err := h.ctl.CreateWork(operator, kernel.CreateWorkRequest{Scope: "s1", Binding: binding, Keys: keys, Grants: []string{"extra"}})
	if err != nil {
		h.t.Fatal(err)
	}
	return res.Work
}

func (h *harness) work(id string) storage.Work {
	h.t.Helper()
	w, err := h.store.GetWork(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return w
}

func (h *harness) execution(id string) storage.Execution {
	h.t.Helper()
	e, err := h.store.GetExecution(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return e
}

func (h *harness) declare(seg *schedulertest.Segment, d kernel.Declaration) {
	h.t.Helper()
	ctx := context.Background()
	err := h.store.WithTx(ctx, func(tx storage.Tx) error {
		if _, err := h.s.LeaseGuard(ctx, tx, seg.Req.ExecutionID, seg.Req.Epoch, h.owner); err != nil {
			return err
		}
		return h.s.Declare(ctx, tx, seg.Req.ExecutionID, seg.Req.Epoch, d)
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

func mustCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := kernel.CodeOf(err); got != code {
		t.Fatalf("error %v has code %q, want %q", err, got, code)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
