package toolbelt_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
	"github.com/open-conduit/open-conduit/internal/toolbelt/toolbelttest"
)

// guardReads counts, for each transaction it runs, the reads a call's
// guard may make: the one GetCallGuard, or the four reads it stands for.
type guardReads struct {
	storage.Store
	mu  sync.Mutex
	txs []map[string]int
}

type guardReadsTx struct {
	storage.Tx
	n map[string]int
}

func (s *guardReads) WithTx(ctx context.Context, fn func(tx storage.Tx) error) error {
	t := &guardReadsTx{n: map[string]int{}}
	err := s.Store.WithTx(ctx, func(tx storage.Tx) error {
		clear(t.n)
		t.Tx = tx
		return fn(t)
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	s.txs = append(s.txs, t.n)
	return err
}

// guarded returns the counts of the transactions that read a guard, in
// either way, and forgets every transaction.
func (s *guardReads) guarded() []map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]int
	for _, n := range s.txs {
		if n["GetCallGuard"]+n["GetPendingDeclaration"]+n["LatestGeneration"] > 0 {
			out = append(out, n)
		}
	}
	s.txs = nil
	return out
}

func (t *guardReadsTx) GetCallGuard(ctx context.Context, id string) (storage.CallGuard, error) {
	t.n["GetCallGuard"]++
	return t.Tx.GetCallGuard(ctx, id)
}

func (t *guardReadsTx) GetExecution(ctx context.Context, id string) (storage.Execution, error) {
	if t.n["GetCallGuard"] == 0 {
		t.n["GetExecution before the guard"]++
	}
	return t.Tx.GetExecution(ctx, id)
}

func (t *guardReadsTx) GetWork(ctx context.Context, id string) (storage.Work, error) {
	if t.n["GetCallGuard"] == 0 {
		t.n["GetWork before the guard"]++
	}
	return t.Tx.GetWork(ctx, id)
}

func (t *guardReadsTx) GetPendingDeclaration(ctx context.Context, id string) (storage.Declaration, error) {
	t.n["GetPendingDeclaration"]++
	return t.Tx.GetPendingDeclaration(ctx, id)
}

func (t *guardReadsTx) LatestGeneration(ctx context.Context) (storage.Generation, error) {
	t.n["LatestGeneration"]++
	return t.Tx.LatestGeneration(ctx)
}

// A call's transaction reads its lease guard and the generation of its
// ceiling in one GetCallGuard, and none of the four reads it stands for:
// an emission and an extension operation (its claim; its record runs no
// guard).
func TestCallTransactionReadsTheGuardOnce(t *testing.T) {
	var reads *guardReads
	h := toolbelttest.Harness{Name: "guard", New: func(env *toolbelttest.Env) (toolbelttest.Toolbelt, error) {
		opts := env.Options()
		reads = &guardReads{Store: opts.Store}
		opts.Store = reads
		return toolbelt.New(opts)
	}}
	f, err := toolbelttest.NewFixture(t.TempDir(), h, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	echo := extension.Operation{Name: "acme.echo", Summary: "Echo.", Handler: func(_ context.Context, _ extension.Authority, in json.RawMessage) (json.RawMessage, error) {
		return in, nil
	}}
	if err := f.Register(extension.Registration{Name: "acme", Operations: []extension.Operation{echo}}); err != nil {
		t.Fatal(err)
	}
	a, err := f.Start()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		op, input, requestID string
		txs                  int
	}{
		{"emit", `{"type":"guard.tick"}`, "", 1},
		{"acme.echo", `{"n":1}`, "req-1", 1},
	} {
		reads.guarded()
		if _, err := f.Call(a.Token, c.op, c.input, c.requestID); err != nil {
			t.Fatalf("%s: %v", c.op, err)
		}
		txs := reads.guarded()
		if len(txs) != c.txs {
			t.Errorf("%s: %d transactions read a guard, want %d", c.op, len(txs), c.txs)
		}
		for i, n := range txs {
			want := map[string]int{"GetCallGuard": 1}
			if fmt.Sprint(n) != fmt.Sprint(want) {
				t.Errorf("%s: transaction %d read %v, want %v", c.op, i+1, n, want)
			}
		}
	}
}
