package introspection_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/extensions/introspection"
	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/daemon/introspectport"
	"github.com/open-conduit/open-conduit/internal/ids"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/sqlite"
)

var t0 = time.Date(2032, 3, 4, 5, 6, 7, 0, time.UTC)

// world is a real SQLite store holding, in scope s1, a causal root R (an
// operator's Event without a Work) and this tree of Work:
//
//	W (created by R) ── e1 ── C1 (created by e1) ── e2 ── G (created by e2)
//	O (created by R, not W's descendant) ── eO ── eG (an Event of G caused by eO)
//
// and X, a Work of scope s2. The caller is C1's attempt: its tree is C1
// and G.
type world struct {
	store *sqlite.Store
	clock *clock.Fake
	rt    *kernel.Runtime
	port  *introspectport.Port

	denied map[string]bool // reads the ceiling refuses

	r, e1, e2, eO, eG storage.Event
	w, c1, g, o, x    storage.Work
	auth              extension.Authority
	reg               extension.Registration
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := context.Background()
	w := &world{clock: clock.NewFake(t0), denied: map[string]bool{}}
	s, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(t.TempDir(), "state.db"), Clock: w.clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	w.store = s
	w.rt, err = kernel.New(kernel.Options{Clock: w.clock, IDs: ids.NewGenerator(w.clock, rand.NewChaCha8([32]byte{3}))})
	if err != nil {
		t.Fatal(err)
	}
	err = s.WithTx(ctx, func(tx storage.Tx) error {
		accept := func(ev storage.Event) storage.Event {
			w.clock.Advance(time.Second)
			out, err := w.rt.AcceptInTx(ctx, tx, ev)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		create := func(scope, parent, cause string) storage.Work {
			w.clock.Advance(time.Second)
			res, err := w.rt.CreateWorkInTx(ctx, tx, kernel.NewWork{Scope: scope, Binding: "b1", Parent: parent, Cause: cause})
			if err != nil {
				t.Fatal(err)
			}
			return res.Work
		}
		w.r = accept(storage.Event{Type: "test.start", Source: kernel.SourceManual, Scope: "s1"})
		w.w = create("s1", "", w.r.ID)
		w.e1 = accept(storage.Event{Type: "test.step", Source: kernel.SourceExecution, Scope: "s1", Work: w.w.ID, Parent: w.w.CreatedEvent})
		w.c1 = create("s1", w.w.ID, w.e1.ID)
		w.e2 = accept(storage.Event{Type: "test.step", Source: kernel.SourceExecution, Scope: "s1", Work: w.c1.ID, Parent: w.c1.CreatedEvent})
		w.g = create("s1", w.c1.ID, w.e2.ID)
		w.o = create("s1", "", w.r.ID)
		w.eO = accept(storage.Event{Type: "test.step", Source: kernel.SourceExecution, Scope: "s1", Work: w.o.ID, Parent: w.o.CreatedEvent})
		w.eG = accept(storage.Event{Type: "test.step", Source: kernel.SourceExecution, Scope: "s1", Work: w.g.ID, Parent: w.eO.ID})
		w.x = create("s2", "", "")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	w.port = &introspectport.Port{
		Store: s,
		Reads: func(scope, read string) bool { return scope == "s1" && !w.denied[read] },
	}
	w.auth = extension.Authority{Scope: "s1", Work: w.c1.ID, Execution: "exe_c1", Binding: "b1", Generation: 7, Epoch: 1}
	w.reg = introspection.Registration(w.port)
	return w
}

// call runs an operation's handler as the caller and decodes its result
// into out.
func (w *world) call(t *testing.T, op, input string, out any) error {
	t.Helper()
	for _, o := range w.reg.Operations {
		if o.Name == op {
			res, err := o.Handler(context.Background(), w.auth, json.RawMessage(input))
			if err != nil {
				return err
			}
			if err := json.Unmarshal(res, out); err != nil {
				t.Fatalf("%s answered %s: %v", op, res, err)
			}
			return nil
		}
	}
	t.Fatalf("no operation %s", op)
	return nil
}

func code(err error) string {
	var oe *extension.OperationError
	if errors.As(err, &oe) {
		return oe.Code
	}
	return ""
}

func mustCode(t *testing.T, err error, want string) {
	t.Helper()
	if got := code(err); got != want {
		t.Fatalf("error %v has code %q, want %q", err, got, want)
	}
}

func TestRegistration(t *testing.T) {
	reg := introspection.Registration(nil)
	if reg.Name != "introspection" {
		t.Fatalf("registration name %s", reg.Name)
	}
	var names []string
	for _, op := range reg.Operations {
		names = append(names, op.Name)
		if op.Summary == "" || op.Guidance == "" || op.Handler == nil {
			t.Errorf("%s lacks a summary, guidance or handler", op.Name)
		}
		var s struct {
			Type                 string `json:"type"`
			AdditionalProperties *bool  `json:"additionalProperties"`
		}
		if err := json.Unmarshal(op.InputSchema, &s); err != nil || s.Type != "object" || s.AdditionalProperties == nil || *s.AdditionalProperties {
			t.Errorf("%s's input schema %s is not a strict object (%v)", op.Name, op.InputSchema, err)
		}
	}
	want := []string{"introspection.work", "introspection.events", "introspection.chain", "introspection.executions", "introspection.waits"}
	if !slices.Equal(names, want) {
		t.Fatalf("operations %v, want %v", names, want)
	}
	if len(reg.Toolsets) != 1 || reg.Toolsets[0].Name != "introspection.reader" || !slices.Equal(reg.Toolsets[0].Names(), want) {
		t.Fatalf("toolsets %+v", reg.Toolsets)
	}
	for _, m := range reg.Toolsets[0].Operations {
		if m.Since == "" {
			t.Errorf("toolset member %s has no since", m.Name)
		}
	}
	if err := extension.CheckToolset(reg.Name, reg.Toolsets[0]); err != nil {
		t.Fatal(err)
	}
	// Without a port a call fails, and is no verdict.
	_, err := reg.Operations[0].Handler(context.Background(), extension.Authority{Scope: "s1", Work: "w"}, json.RawMessage(`{}`))
	if err == nil || code(err) != "" {
		t.Fatalf("a call without a port: %v", err)
	}
}

func workIDs(ws []struct {
	ID     string `json:"id"`
	Parent string `json:"parent"`
}) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.ID)
	}
	return out
}

type workResult struct {
	Work struct {
		ID    string `json:"id"`
		State string `json:"state"`
	} `json:"work"`
	Descendants []struct {
		ID     string `json:"id"`
		Parent string `json:"parent"`
	} `json:"descendants"`
	Truncated bool `json:"truncated"`
}

func TestWorkIsConfinedToTheTree(t *testing.T) {
	w := newWorld(t)
	var res workResult
	if err := w.call(t, "introspection.work", `{}`, &res); err != nil {
		t.Fatal(err)
	}
	if res.Work.ID != w.c1.ID || res.Work.State != "ready" || !slices.Equal(workIDs(res.Descendants), []string{w.g.ID}) || res.Truncated {
		t.Fatalf("own tree %+v", res)
	}
	if err := w.call(t, "introspection.work", `{"work":"`+w.g.ID+`"}`, &res); err != nil || res.Work.ID != w.g.ID || len(res.Descendants) != 0 {
		t.Fatalf("a descendant: %+v (%v)", res, err)
	}
	// The parent, a sibling tree, another scope's Work and a Work that
	// does not exist are all refused alike.
	var msgs []string
	for _, id := range []string{w.w.ID, w.o.ID, w.x.ID, "wrk_nope"} {
		err := w.call(t, "introspection.work", `{"work":"`+id+`"}`, &res)
		mustCode(t, err, "not_in_tree")
		msgs = append(msgs, err.Error())
		if strings.Contains(err.Error(), id) {
			t.Errorf("the refusal %q names the Work", err)
		}
	}
	if len(slices.Compact(slices.Clone(msgs))) != 1 {
		t.Fatalf("refusals differ, telling outside Work from missing Work: %q", msgs)
	}
	// From W's attempt the whole tree shows, breadth first, and a limit
	// truncates it.
	w.auth.Work = w.w.ID
	if err := w.call(t, "introspection.work", `{}`, &res); err != nil || !slices.Equal(workIDs(res.Descendants), []string{w.c1.ID, w.g.ID}) || res.Truncated {
		t.Fatalf("W's tree %+v (%v)", res, err)
	}
	if err := w.call(t, "introspection.work", `{"limit":1}`, &res); err != nil || !slices.Equal(workIDs(res.Descendants), []string{w.c1.ID}) || !res.Truncated {
		t.Fatalf("W's tree limited to 1: %+v (%v)", res, err)
	}
}

func TestInputIsStrict(t *testing.T) {
	w := newWorld(t)
	var res map[string]any
	for op, input := range map[string]string{
		"introspection.work":       `{"scope":"s2"}`,
		"introspection.events":     `{"limit":0}`,
		"introspection.chain":      `{}`,
		"introspection.executions": `{"state":"active"}`,
		"introspection.waits":      `{"after":"garbage"}`,
	} {
		mustCode(t, w.call(t, op, input, &res), "invalid_input")
	}
}

type eventsResult struct {
	Events []struct {
		ID   string `json:"id"`
		Seq  int64  `json:"seq"`
		Work string `json:"work"`
	} `json:"events"`
	NextAfterSeq int64 `json:"next_after_seq"`
}

func eventIDs(r eventsResult) []string {
	var out []string
	for _, e := range r.Events {
		out = append(out, e.ID)
	}
	return out
}

func TestEventsPage(t *testing.T) {
	w := newWorld(t)
	var res eventsResult
	if err := w.call(t, "introspection.events", `{}`, &res); err != nil {
		t.Fatal(err)
	}
	if want := []string{w.c1.CreatedEvent, w.e2.ID}; !slices.Equal(eventIDs(res), want) || res.NextAfterSeq != 0 {
		t.Fatalf("C1's events %v (next %d), want %v", eventIDs(res), res.NextAfterSeq, want)
	}
	// Page by page, one at a time.
	var got []string
	after := int64(0)
	for range 5 {
		res = eventsResult{}
		if err := w.call(t, "introspection.events", `{"limit":1,"after_seq":`+itoa(after)+`}`, &res); err != nil {
			t.Fatal(err)
		}
		got = append(got, eventIDs(res)...)
		if res.NextAfterSeq == 0 {
			break
		}
		after = res.NextAfterSeq
	}
	if want := []string{w.c1.CreatedEvent, w.e2.ID}; !slices.Equal(got, want) {
		t.Fatalf("paged %v, want %v", got, want)
	}
	// A descendant's, with a type filter.
	if err := w.call(t, "introspection.events", `{"work":"`+w.g.ID+`","type":"test.step"}`, &res); err != nil || !slices.Equal(eventIDs(res), []string{w.eG.ID}) {
		t.Fatalf("G's test.step events %v (%v)", eventIDs(res), err)
	}
	mustCode(t, w.call(t, "introspection.events", `{"work":"`+w.w.ID+`"}`, &res), "not_in_tree")
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

type chainResult struct {
	Event struct {
		ID string `json:"id"`
	} `json:"event"`
	Ancestors []struct {
		ID string `json:"id"`
	} `json:"ancestors"`
	AncestorsTruncated bool `json:"ancestors_truncated"`
	eventsResult
}

func TestChain(t *testing.T) {
	w := newWorld(t)
	var res chainResult
	if err := w.call(t, "introspection.chain", `{"event":"`+w.e2.ID+`"}`, &res); err != nil {
		t.Fatal(err)
	}
	ancestors := func(res chainResult) []string {
		var anc []string
		for _, a := range res.Ancestors {
			anc = append(anc, a.ID)
		}
		return anc
	}
	// C1's creation was caused by e1, an Event of its parent W, outside
	// C1's tree: the chain stops there.
	if want := []string{w.c1.CreatedEvent}; res.Event.ID != w.e2.ID || !slices.Equal(ancestors(res), want) || !res.AncestorsTruncated {
		t.Fatalf("chain of e2: %s ancestors %v truncated %v, want %v and truncated", res.Event.ID, ancestors(res), res.AncestorsTruncated, want)
	}
	// The root's Events of the tree only: not R, W's, O's.
	if want := []string{w.c1.CreatedEvent, w.e2.ID, w.g.CreatedEvent, w.eG.ID}; !slices.Equal(eventIDs(res.eventsResult), want) || res.NextAfterSeq != 0 {
		t.Fatalf("root events %v next %d, want %v", eventIDs(res.eventsResult), res.NextAfterSeq, want)
	}
	// Paged.
	res = chainResult{}
	if err := w.call(t, "introspection.chain", `{"event":"`+w.e2.ID+`","limit":3}`, &res); err != nil || len(res.Events) != 3 || res.NextAfterSeq == 0 {
		t.Fatalf("first page %+v (%v)", res, err)
	}
	next := res.NextAfterSeq
	res = chainResult{}
	if err := w.call(t, "introspection.chain", `{"event":"`+w.e2.ID+`","limit":3,"after_seq":`+itoa(next)+`}`, &res); err != nil ||
		!slices.Equal(eventIDs(res.eventsResult), []string{w.eG.ID}) || res.NextAfterSeq != 0 {
		t.Fatalf("second page %v next %d (%v)", eventIDs(res.eventsResult), res.NextAfterSeq, err)
	}
	// eG was caused by O's Event, outside the tree: the chain stops there.
	res = chainResult{}
	if err := w.call(t, "introspection.chain", `{"event":"`+w.eG.ID+`"}`, &res); err != nil || len(res.Ancestors) != 0 || !res.AncestorsTruncated {
		t.Fatalf("chain of eG: %+v (%v)", res, err)
	}
	// An Event outside the tree, a root without a Work, and one that does
	// not exist are refused alike.
	for _, id := range []string{w.e1.ID, w.eO.ID, w.r.ID, "evt_nope"} {
		mustCode(t, w.call(t, "introspection.chain", `{"event":"`+id+`"}`, &res), "not_in_tree")
	}
	// From W's attempt the chain runs up to the operator's root, which
	// belongs to no Work, and the root's Events of W's tree include W's.
	w.auth.Work = w.w.ID
	res = chainResult{}
	if err := w.call(t, "introspection.chain", `{"event":"`+w.e2.ID+`"}`, &res); err != nil {
		t.Fatal(err)
	}
	if want := []string{w.r.ID, w.w.CreatedEvent, w.e1.ID, w.c1.CreatedEvent}; !slices.Equal(ancestors(res), want) || res.AncestorsTruncated {
		t.Fatalf("W's chain of e2: ancestors %v truncated %v, want %v", ancestors(res), res.AncestorsTruncated, want)
	}
	if want := []string{w.w.CreatedEvent, w.e1.ID, w.c1.CreatedEvent, w.e2.ID, w.g.CreatedEvent, w.eG.ID}; !slices.Equal(eventIDs(res.eventsResult), want) {
		t.Fatalf("W's root events %v, want %v", eventIDs(res.eventsResult), want)
	}
}

type execResult struct {
	Executions []struct {
		ID   string `json:"id"`
		Work string `json:"work"`
	} `json:"executions"`
	Next string `json:"next"`
}

type waitsResult struct {
	Waits []struct {
		ID    string `json:"id"`
		State string `json:"state"`
	} `json:"waits"`
	Next string `json:"next"`
}

// attempts gives a Work n finished executions, each with a wait that was
// satisfied, and a last, active wait.
func (w *world) attempts(t *testing.T, work storage.Work, n int) (exes, waits []string) {
	t.Helper()
	ctx := context.Background()
	err := w.store.WithTx(ctx, func(tx storage.Tx) error {
		for i := range n {
			w.clock.Advance(time.Second)
			now := w.clock.Now()
			e, err := tx.InsertExecution(ctx, &storage.InsertExecutionParams{
				ID: "exe_" + work.ID + "_" + itoa(int64(i)), Work: work.ID, Scope: work.Scope, Binding: "b1", Executor: "shell",
				Generation: 7, Owner: "d", LeaseExpiresAt: now.Add(time.Minute), Deadline: now.Add(time.Hour), CreatedAt: now,
			})
			if err != nil {
				return err
			}
			exes = append(exes, e.ID)
			wt, err := tx.InsertWait(ctx, &storage.InsertWaitParams{
				ID: "wai_" + work.ID + "_" + itoa(int64(i)), Work: work.ID, Scope: work.Scope, Execution: e.ID, Epoch: 1,
				Types: []string{"test.go"}, Keys: []string{work.ID}, CreatedAt: now,
			})
			if err != nil {
				return err
			}
			waits = append(waits, wt.ID)
			if i < n-1 {
				if _, err := tx.UpdateWait(ctx, &storage.UpdateWaitParams{ID: wt.ID, State: storage.WaitSatisfied, Now: now}); err != nil {
					return err
				}
			}
			st, res := storage.ExecutionFinished, storage.ResultSucceeded
			if _, err := tx.UpdateExecution(ctx, &storage.UpdateExecutionParams{ID: e.ID, Epoch: 1, State: &st, Result: &res, Now: now}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return exes, waits
}

func TestExecutionsAndWaitsPage(t *testing.T) {
	w := newWorld(t)
	exes, waits := w.attempts(t, w.g, 3)
	w.attempts(t, w.o, 1)
	var got []string
	after := ""
	for range 5 {
		var res execResult
		if err := w.call(t, "introspection.executions", `{"work":"`+w.g.ID+`","limit":2,"after":"`+after+`"}`, &res); err != nil {
			t.Fatal(err)
		}
		for _, e := range res.Executions {
			got = append(got, e.ID)
		}
		if res.Next == "" {
			break
		}
		after = res.Next
	}
	if !slices.Equal(got, exes) {
		t.Fatalf("paged executions %v, want %v", got, exes)
	}
	var own execResult
	if err := w.call(t, "introspection.executions", `{}`, &own); err != nil || len(own.Executions) != 0 {
		t.Fatalf("C1 has no executions: %+v (%v)", own, err)
	}
	var wr waitsResult
	if err := w.call(t, "introspection.waits", `{"work":"`+w.g.ID+`"}`, &wr); err != nil || len(wr.Waits) != 3 || wr.Waits[0].ID != waits[0] {
		t.Fatalf("G's waits %+v (%v)", wr, err)
	}
	if err := w.call(t, "introspection.waits", `{"work":"`+w.g.ID+`","state":"active"}`, &wr); err != nil || len(wr.Waits) != 1 || wr.Waits[0].ID != waits[2] {
		t.Fatalf("G's active waits %+v (%v)", wr, err)
	}
	if err := w.call(t, "introspection.waits", `{"work":"`+w.g.ID+`","limit":1}`, &wr); err != nil || len(wr.Waits) != 1 || wr.Next == "" {
		t.Fatalf("G's first wait %+v (%v)", wr, err)
	}
	mustCode(t, w.call(t, "introspection.executions", `{"work":"`+w.o.ID+`"}`, &own), "not_in_tree")
	mustCode(t, w.call(t, "introspection.waits", `{"work":"`+w.o.ID+`"}`, &wr), "not_in_tree")
}

// Each operation needs its read; the others do not stand in for it.
func TestReadCeiling(t *testing.T) {
	w := newWorld(t)
	ops := map[string]string{
		"introspection.work":       "work",
		"introspection.events":     "events",
		"introspection.chain":      "events",
		"introspection.executions": "executions",
		"introspection.waits":      "waits",
	}
	input := func(op string) string {
		if op == "introspection.chain" {
			return `{"event":"` + w.e2.ID + `"}`
		}
		return `{}`
	}
	for op, read := range ops {
		var res map[string]any
		if err := w.call(t, op, input(op), &res); err != nil {
			t.Fatalf("%s with every read allowed: %v", op, err)
		}
		w.denied[read] = true
		err := w.call(t, op, input(op), &res)
		mustCode(t, err, "read_not_allowed")
		if !strings.Contains(err.Error(), read) {
			t.Errorf("%s's refusal %q does not name the read", op, err)
		}
		// A tree check never runs first: a Work outside is refused for
		// the ceiling too, saying nothing about the Work.
		if op != "introspection.chain" {
			mustCode(t, w.call(t, op, `{"work":"`+w.x.ID+`"}`, &res), "read_not_allowed")
		}
		w.denied[read] = false
	}
}
