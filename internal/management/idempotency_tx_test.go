package management_test

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
)

// An idempotent control's Idempotency-Key record is written in the
// control's own transaction: a new request commits once, and its record
// replays the very response it got.
func TestIdempotencyRecordCommitsWithTheRequest(t *testing.T) {
	var commits atomic.Int64
	s := mgmttest.StartStack(t, mgmttest.StackOptions{OnCommit: func(time.Duration) { commits.Add(1) }})
	ctx := context.Background()
	c := s.Client
	type step struct {
		name string
		do   func(key string) (raw []byte, replayed bool, err error)
	}
	var work string
	steps := []step{
		{"create", func(key string) ([]byte, bool, error) {
			out, err := c.CreateWork(ctx, client.CreateWorkRequest{Scope: "setup", Input: input(`{"n":1}`)}, keyed(key))
			if err != nil {
				return nil, false, err
			}
			work = out.Work.ID
			return out.Raw, out.Replayed, nil
		}},
		{"emit", func(key string) ([]byte, bool, error) {
			out, err := c.Emit(ctx, client.EmitRequest{Scope: "setup", Type: "note.added", Data: []byte(`{"n":2}`)}, keyed(key))
			if err != nil {
				return nil, false, err
			}
			return out.Raw, out.Replayed, nil
		}},
		{"cancel", func(key string) ([]byte, bool, error) {
			out, err := c.CancelWork(ctx, work, "done", keyed(key))
			if err != nil {
				return nil, false, err
			}
			return out.Raw, out.Replayed, nil
		}},
	}
	for _, st := range steps {
		before := commits.Load()
		first, replayed, err := st.do("tx-" + st.name)
		if err != nil || replayed {
			t.Fatalf("%s: %v (replayed %v)", st.name, err, replayed)
		}
		if n := commits.Load() - before; n != 1 {
			t.Fatalf("%s committed %d transactions, want one: the effect and its Idempotency-Key record together", st.name, n)
		}
		again, replayed, err := st.do("tx-" + st.name)
		if err != nil || !replayed || !bytes.Equal(again, first) {
			t.Fatalf("%s replay: %v (replayed %v)\nfirst %s\nagain %s", st.name, err, replayed, first, again)
		}
		if n := commits.Load() - before; n != 1 {
			t.Fatalf("%s's replay committed %d more transactions, want none", st.name, n-1)
		}
	}
}
