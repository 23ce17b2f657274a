package toolbelt_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
	"github.com/open-conduit/open-conduit/internal/toolbelt/toolbelttest"
)

// The live-narrowing drill: many executions emit while an admin narrows
// their scope's ceiling, as a config apply does (the generation commits,
// then becomes active). Its size is small in the suite; run it larger
// with, for example:
//
//	go test ./internal/toolbelt -run TestNarrowingDrill -v -narrowing.executions=64 -narrowing.calls=100000
var (
	drillExecutions = flag.Int("narrowing.executions", 8, "executions emitting concurrently in the narrowing drill")
	drillCalls      = flag.Int("narrowing.calls", 600, "emit calls of the narrowing drill (the narrowing commits after half of them)")
)

// orderedStore numbers the commits of the transactions it runs: the
// engine serialises writers, so the number taken at the end of a
// transaction's function is its commit order. It notes which events each
// transaction inserted and which committed a generation.
type orderedStore struct {
	storage.Store
	n      atomic.Int64
	mu     sync.Mutex
	events map[string]int64 // event id -> commit number
	gens   map[int64]int64  // generation number -> commit number
}

type orderedTx struct {
	storage.Tx
	events []string
	gens   []int64
}

func (t *orderedTx) InsertEvent(ctx context.Context, p *storage.InsertEventParams) (storage.Event, error) {
	ev, err := t.Tx.InsertEvent(ctx, p)
	if err == nil {
		t.events = append(t.events, ev.ID)
	}
	return ev, err
}

func (t *orderedTx) InsertGeneration(ctx context.Context, g *storage.Generation) error {
	err := t.Tx.InsertGeneration(ctx, g)
	if err == nil {
		t.gens = append(t.gens, g.Number)
	}
	return err
}

func (s *orderedStore) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	var ot *orderedTx
	var at int64
	err := s.Store.WithTx(ctx, func(tx storage.Tx) error {
		ot = &orderedTx{Tx: tx}
		if err := fn(ot); err != nil {
			return err
		}
		at = s.n.Add(1)
		return nil
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ot.events {
		s.events[id] = at
	}
	for _, g := range ot.gens {
		s.gens[g] = at
	}
	return nil
}

// drillCounts are what the drill prints.
type drillCounts struct {
	Calls, Accepted, Refused, AcceptedAfter, CommittedAfter, Lost int
}

// runNarrowingDrill runs calls emits from executions attempts and commits
// generation 1, which takes emit out of the scope's ceiling, once half of
// them were answered; the active ceiling (what Authorize reads) narrows
// only after that commit, like configsvc's publish. stale keeps the
// in-memory ceiling wide for the whole run: only the in-transaction check
// can refuse.
func runNarrowingDrill(t testing.TB, executions, calls int, stale bool) drillCounts {
	t.Helper()
	var os *orderedStore
	h := toolbelttest.Harness{Name: "narrowing drill", New: func(env *toolbelttest.Env) (toolbelttest.Toolbelt, error) {
		env.Runtime.SetCausal(kernel.CausalLimits{MaxDepth: 8, PerMinute: 1 << 30})
		opts := env.Options()
		os = &orderedStore{Store: env.Store, events: map[string]int64{}, gens: map[int64]int64{}}
		opts.Store = os
		if stale {
			opts.Authorize = func(string, string) bool { return true }
		}
		opts.AuthorizeAt = func(_ context.Context, gen int64, scope, op string) (bool, error) {
			return !(gen >= 1 && scope == toolbelttest.Scope && op == "emit"), nil
		}
		return toolbelt.New(opts)
	}}
	f, err := toolbelttest.NewFixture(t.TempDir(), h, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	attempts := make([]*toolbelttest.Attempt, executions)
	for i := range attempts {
		if attempts[i], err = f.Start(); err != nil {
			t.Fatal(err)
		}
	}

	var (
		issued   atomic.Int64
		answered atomic.Int64
		mu       sync.Mutex
		accepted []string // event ids answered ok
		refused  int
		narrowed = make(chan struct{})
		narrow   sync.Once
	)
	doNarrow := func() {
		narrow.Do(func() {
			go func() {
				defer close(narrowed)
				ctx := context.Background()
				err := os.WithTx(ctx, func(tx storage.Tx) error {
					return tx.InsertGeneration(ctx, &storage.Generation{Number: 1, Hash: "narrowed", Normalized: json.RawMessage(`{}`),
						Actor: "operator:drill", CreatedAt: f.Env.Clock.Now()})
				})
				if err != nil {
					t.Error(err)
					return
				}
				// Activation follows the commit, as in configsvc.
				f.Env.Ceiling.Deny(toolbelttest.Scope, "emit")
			}()
		})
	}
	var wg sync.WaitGroup
	for i, a := range attempts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; issued.Add(1) <= int64(calls); n++ {
				res, err := f.Call(a.Token, "emit", fmt.Sprintf(`{"type":"drill.tick","data":{"e":%d,"n":%d}}`, i, n), "")
				if answered.Add(1) >= int64(calls/2) {
					doNarrow()
				}
				mu.Lock()
				switch {
				case err == nil:
					var out struct {
						EventID string `json:"event_id"`
					}
					if jerr := json.Unmarshal(res.Result, &out); jerr != nil || out.EventID == "" {
						t.Errorf("emit answered %s", res.Result)
					}
					accepted = append(accepted, out.EventID)
				case errors.Is(err, extension.ErrForbidden):
					refused++
				default:
					t.Errorf("emit: %v", err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	doNarrow()
	<-narrowed

	os.mu.Lock()
	defer os.mu.Unlock()
	cut, ok := os.gens[1]
	if !ok {
		t.Fatal("the narrowing generation never committed")
	}
	c := drillCounts{Calls: calls, Accepted: len(accepted), Refused: refused}
	var stored []storage.Event
	for after := int64(0); ; {
		page, err := f.Env.Store.ListEvents(context.Background(), &storage.ListEventsParams{Scope: toolbelttest.Scope, Type: "drill.tick", AfterSeq: after, Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		stored = append(stored, page...)
		after = page[len(page)-1].Seq
	}
	have := map[string]bool{}
	for _, ev := range stored {
		have[ev.ID] = true
		if os.events[ev.ID] > cut {
			c.CommittedAfter++
		}
	}
	for _, id := range accepted {
		if !have[id] {
			c.Lost++
		}
		if os.events[id] > cut {
			c.AcceptedAfter++
		}
	}
	if len(stored) != len(accepted) {
		t.Errorf("%d drill events are stored for %d accepted calls", len(stored), len(accepted))
	}
	return c
}

// TestNarrowingDrill: once the narrowing generation commits, no emit it
// took away commits after it, and no accepted emit is lost.
func TestNarrowingDrill(t *testing.T) {
	c := runNarrowingDrill(t, *drillExecutions, *drillCalls, false)
	t.Logf("narrowing drill: executions=%d calls=%d accepted=%d refused=%d accepted_after_narrowing_commit=%d committed_after=%d lost=%d",
		*drillExecutions, c.Calls, c.Accepted, c.Refused, c.AcceptedAfter, c.CommittedAfter, c.Lost)
	if c.AcceptedAfter != 0 || c.CommittedAfter != 0 || c.Lost != 0 {
		t.Fatalf("%+v: want 0 accepted or committed after the narrowing commit and 0 lost", c)
	}
	if c.Accepted+c.Refused != c.Calls || c.Refused == 0 || c.Accepted == 0 {
		t.Fatalf("%+v: every call is answered, some before the narrowing and some refused after it", c)
	}
}

// TestCeilingCheckedInTheCallsTransaction: a call that passed the ceiling
// outside storage (the active generation not yet switched) is refused
// inside its transaction when the narrowing generation is committed, and
// commits nothing. It is the drill's window held open.
func TestCeilingCheckedInTheCallsTransaction(t *testing.T) {
	c := runNarrowingDrill(t, 2, 40, true)
	if c.AcceptedAfter != 0 || c.CommittedAfter != 0 || c.Lost != 0 || c.Refused == 0 {
		t.Fatalf("%+v: with the active ceiling still wide, the committed generation must refuse every later emit", c)
	}
}
