package daemon

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/configsvc"
	"github.com/open-conduit/open-conduit/internal/statedir"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/postgres/pgtest"
)

// callerConfig is a configuration whose job, each time the test writes a
// line into fifo, calls read_context through os and appends "ok" or
// "refused" to mark, until it reads "exit". withRead grants read_context
// (in the scope's ceiling and the binding); without it only
// declare_outcome is granted.
func callerConfig(fifo, mark string, withRead bool) []byte {
	ops := []string{"declare_outcome"}
	if withRead {
		ops = append(ops, "read_context")
	}
	script := `echo started >> "$MARK"; while read cmd < "$FIFO"; do [ "$cmd" = exit ] && exit 0; ` +
		`if os call read_context >/dev/null 2>&1; then echo ok >> "$MARK"; else echo refused >> "$MARK"; fi; done`
	b, _ := json.Marshal(map[string]any{
		"version": 1,
		"scopes": map[string]any{"t": map[string]any{
			"authorization": map[string]any{"operations": ops, "reads": []string{"work", "events"}},
			"bindings": map[string]any{"job": map[string]any{
				"executor":   "shell",
				"config":     map[string]any{"command": []string{"sh", "-c", script}, "env": map[string]string{"FIFO": fifo, "MARK": mark}},
				"operations": ops,
			}},
		}},
	})
	return b
}

// marks reads the lines of mark once it has n of them.
func marks(t *testing.T, mark string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(guard)
	for {
		b, _ := os.ReadFile(mark)
		lines := strings.Fields(string(b))
		if len(lines) >= n {
			return lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never had %d lines (has %q)", mark, n, lines)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTwoDaemonsShareGenerationsCredentialsAndCursors: two daemons, each
// with a state directory of its own, on one PostgreSQL store. The second
// starts with an empty state directory: it serves the generation the
// first committed (its document read from the store) and, since the owner
// already has a credential, issues none and says how to get a token; the
// first's token file copied over works at it. An Idempotency-Key request
// through one is replayed through the other, and a cursor from one pages
// on at the other. An apply through the first is served by the second
// without a restart (announced through the store, not waited for at a
// sweep), and the token of an execution the second serves is refused on
// its next call once the apply narrowed its grant.
func TestTwoDaemonsShareGenerationsCredentialsAndCursors(t *testing.T) {
	ctx := context.Background()
	a, b, p := sharedPair(t)
	stateB, fifo, mark, narrow := b.d.state, p.fifo, p.mark, p.narrow
	if g := b.d.cfg.Active().Generation; g != 1 {
		t.Fatalf("B serves generation %d, want the first daemon's 1", g)
	}
	if _, err := os.Stat(statedir.OwnerTokenPath(stateB)); !os.IsNotExist(err) {
		t.Fatalf("B wrote an owner token file of its own (%v)", err)
	}
	if !strings.Contains(b.logs.String(), "issued by another daemon") {
		t.Fatalf("B does not say how to get the owner's token:\n%s", b.logs)
	}
	tok, err := os.ReadFile(statedir.OwnerTokenPath(a.d.state))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(statedir.OwnerTokenPath(stateB), tok, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.ListEvents(ctx, client.EventFilter{Page: client.Page{Limit: 1}}); err != nil {
		t.Fatalf("the first daemon's owner token at the second: %v", err)
	}

	// Idempotency-Key and cursors across daemons.
	key := &client.RequestOptions{IdempotencyKey: "shared-key-1"}
	for i := range 3 {
		if _, err := a.client.Emit(ctx, api.EmitRequest{Scope: "t", Type: "test.shared", Data: json.RawMessage(`{"i":` + string(rune('0'+i)) + `}`)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	first, err := a.client.Emit(ctx, api.EmitRequest{Scope: "t", Type: "test.keyed"}, key)
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.client.Emit(ctx, api.EmitRequest{Scope: "t", Type: "test.keyed"}, key)
	if err != nil || again.Event.ID != first.Event.ID {
		t.Fatalf("the same Idempotency-Key through the other daemon: %+v, %v; want event %s again", again, err, first.Event.ID)
	}
	page, err := a.client.ListEvents(ctx, client.EventFilter{Type: "test.shared", Page: client.Page{Limit: 2}})
	if err != nil || len(page.Items) != 2 || page.NextCursor == "" {
		t.Fatalf("first page at A: %+v, %v", page, err)
	}
	rest, err := b.client.ListEvents(ctx, client.EventFilter{Type: "test.shared", Page: client.Page{Limit: 2, Cursor: page.NextCursor}})
	if err != nil || len(rest.Items) != 1 || rest.Items[0].Seq <= page.Items[1].Seq {
		t.Fatalf("A's cursor at B: %+v, %v; want the third event", rest, err)
	}

	// An execution B serves calls read_context, granted.
	w := b.create("t", "job")
	marks(t, mark, 1)
	release(t, fifo, "call")
	if got := marks(t, mark, 2); got[1] != "ok" {
		t.Fatalf("the call before the apply: %q, want ok\nlogs:\n%s", got, b.logs)
	}
	exes := b.executions(w.ID)
	if len(exes) != 1 || exes[0].Owner != b.d.owner {
		t.Fatalf("executions = %+v, want one B runs", exes)
	}

	// An apply through A narrows the grant; B serves it without a
	// restart, well before its first sweep.
	if _, err := a.client.ApplyConfig(operator, narrow, 1, "", nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(guard)
	for b.d.cfg.Active().Generation != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("B never served generation 2\nlogs:\n%s", b.logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(b.logs.String(), "committed through another daemon") {
		t.Errorf("B does not log the generation it picked up")
	}
	// B keeps the document in its state directory for the offline tools.
	if got, err := os.ReadFile(filepath.Join(stateB, configsvc.ConfigFileName)); err != nil || !sameJSON(got, narrow) {
		t.Errorf("B's config.json = %q, %v; want the applied document", got, err)
	}
	release(t, fifo, "call")
	if got := marks(t, mark, 3); got[2] != "refused" {
		t.Fatalf("the call after the apply through the other daemon: %q, want refused", got)
	}
	release(t, fifo, "exit")
	if w = b.terminal(w.ID); w.State != storage.WorkSucceeded {
		t.Fatalf("Work ended %s (%s)", w.State, w.OutcomeMessage)
	}
	calls, err := b.d.store.ListToolbeltCalls(ctx, &storage.ListToolbeltCallsParams{Execution: exes[0].ID, Page: storage.Page{Limit: 10}})
	if err != nil {
		t.Fatal(err)
	}
	var rejected int
	for _, call := range calls {
		if call.Kind == storage.ToolbeltRejected && call.Operation == "read_context" {
			rejected++
		}
	}
	if rejected != 1 {
		t.Fatalf("toolbelt records = %+v, want read_context rejected once", calls)
	}
}

func sameJSON(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// pairParts are what sharedPair's daemons run: the job's fifo and mark
// (callerConfig), and the narrowed configuration.
type pairParts struct {
	fifo, mark string
	narrow     []byte
}

// sharedPair starts two daemons, each with a state directory of its own,
// on one fresh database of the throwaway cluster: A with callerConfig
// granting read_context as its config file (generation 1), B with an
// empty state directory. A runs no round of its own after its start, so
// Work created through B is B's.
func sharedPair(t *testing.T) (a, b *running, p pairParts) {
	t.Helper()
	c := pgtest.Require(t)
	ctx := context.Background()
	db, err := c.FreshDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	onStore := func(o *Options) { o.Store = c.URL(db) }
	stateA, stateB := shortDir(t), shortDir(t)
	fifo, mark := filepath.Join(filepath.Dir(stateA), "fifo"), filepath.Join(filepath.Dir(stateA), "mark")
	if err := os.MkdirAll(stateA, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// A test that failed leaves its job reading the fifo: tell it to
	// exit, after the daemons stopped (it runs under its own supervisor).
	t.Cleanup(func() {
		if f, err := os.OpenFile(fifo, os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
			f.WriteString("exit\n")
			f.Close()
		}
	})
	wide := callerConfig(fifo, mark, true)
	if err := os.WriteFile(filepath.Join(stateA, ConfigFile), wide, 0o600); err != nil {
		t.Fatal(err)
	}
	// A runs no round of its own but at start (and when its own writes
	// wake it; not when B announces Work): Work created through B is B's.
	a = start(t, stateA, onStore, func(o *Options) { o.TickInterval, o.deafToWork = time.Hour, true })
	b = start(t, stateB, onStore)
	return a, b, pairParts{fifo: fifo, mark: mark, narrow: callerConfig(fifo, mark, false)}
}

// TestTokenRevokedThroughAnotherDaemonIsRefused: the daemon serving an
// execution keeps its token in its cache after a call; a revocation of
// that token through the other daemon's management socket is announced
// through the store, the serving daemon drops its cached tokens, and the
// execution's next call is refused, although the execution itself stays
// live (so the lease guard alone would let it through).
func TestTokenRevokedThroughAnotherDaemonIsRefused(t *testing.T) {
	ctx := context.Background()
	a, b, p := sharedPair(t)
	w := b.create("t", "job")
	marks(t, p.mark, 1)
	release(t, p.fifo, "call")
	if got := marks(t, p.mark, 2); got[1] != "ok" {
		t.Fatalf("the call before the revocation: %q, want ok", got)
	}
	exes := b.executions(w.ID)
	if len(exes) != 1 || exes[0].Owner != b.d.owner {
		t.Fatalf("executions = %+v, want one B runs", exes)
	}
	toks, err := b.d.store.ListExecutionTokens(ctx, exes[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	var live []storage.Token
	for _, tok := range toks {
		if tok.RevokedAt.IsZero() {
			live = append(live, tok)
		}
	}
	if len(live) != 1 {
		t.Fatalf("live tokens = %+v, want one", live)
	}
	if _, err := a.client.Revoke(ctx, live[0].ID, nil); err != nil {
		t.Fatal(err)
	}
	// The announcement reaches B on its own time: call until a call is
	// refused, bounded.
	deadline := time.Now().Add(guard)
	for n := 3; ; n++ {
		release(t, p.fifo, "call")
		if got := marks(t, p.mark, n); got[n-1] == "refused" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B still accepts the token revoked through A\nlogs:\n%s", b.logs)
		}
	}
	if exe, err := b.d.store.GetExecution(ctx, exes[0].ID); err != nil || !exe.Live() {
		t.Fatalf("the execution is not live (%+v, %v): the refusal would not show the token's revocation", exe, err)
	}
	release(t, p.fifo, "exit")
	b.terminal(w.ID)
}

// TestWorkCreatedThroughOneDaemonWakesAnother: two daemons on one store,
// neither running a round but at start and when woken, each with one slot
// (max_running 1). Two Work created through A: A's own write wakes A, and
// its announcement (storage.TopicWork) wakes B, so both run at once, one
// on each daemon. Without the announcement the second would wait for a
// tick that never comes: A has no slot, and B was never woken.
func TestWorkCreatedThroughOneDaemonWakesAnother(t *testing.T) {
	c := pgtest.Require(t)
	db, err := c.FreshDatabase(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	stateA, stateB := shortDir(t), shortDir(t)
	fifo, mark := fifoConfig(t, stateA)
	t.Cleanup(func() {
		for range 2 {
			if f, err := os.OpenFile(fifo, os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
				f.WriteString("0\n")
				f.Close()
			}
		}
	})
	path := filepath.Join(stateA, ConfigFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["limits"] = map[string]any{"max_running": 1}
	if raw, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	quiet := func(o *Options) { o.Store, o.TickInterval = c.URL(db), time.Hour }
	a := start(t, stateA, quiet)
	b := start(t, stateB, quiet)
	w1, w2 := a.create("t", "job"), a.create("t", "job")
	waitFile(t, mark, "started\nstarted")
	owners := map[string]bool{}
	for _, w := range []storage.Work{w1, w2} {
		exes := a.executions(w.ID)
		if len(exes) != 1 || exes[0].State != storage.ExecutionRunning {
			t.Fatalf("Work %s: executions %+v, want one running", w.ID, exes)
		}
		owners[exes[0].Owner] = true
	}
	if !owners[a.d.owner] || !owners[b.d.owner] {
		t.Fatalf("the two Work run under %v, want one on each daemon (%s, %s)", owners, a.d.owner, b.d.owner)
	}
	// One write ends both jobs: one reads the code, the other the end of
	// the fifo once the writer closes it.
	release(t, fifo, "0")
	for _, w := range []storage.Work{w1, w2} {
		a.terminal(w.ID)
	}
}
