package toolbelt_test

import (
	"context"
	"errors"
	"testing"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// A refusal of a token that is found but no longer valid (superseded by
// recovery, revoked) is recorded against its execution, epoch and token
// id, so an operator listing an execution's calls sees that its stale
// token was used.
func TestToolbeltRecordsTheRefusalOfAStaleToken(t *testing.T) {
	f := fixture(t, false)
	ctx := context.Background()
	a, err := f.Start()
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.Recover(a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Call(a.Token, "emit", `{"type":"test.stale"}`, ""); !errors.Is(err, extension.ErrForbidden) {
		t.Fatalf("the superseded token's call: %v, want forbidden", err)
	}
	if _, err := f.TB.Guidance(ctx, a.Token, extension.Assertions{}); !errors.Is(err, extension.ErrForbidden) {
		t.Fatalf("the superseded token's guidance read: %v, want forbidden", err)
	}
	if err := f.TB.Revoke(ctx, b.TokenID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Call(b.Token, "emit", `{"type":"test.revoked"}`, ""); !errors.Is(err, extension.ErrForbidden) {
		t.Fatalf("the revoked token's call: %v, want forbidden", err)
	}
	recs, err := f.Env.Store.ListToolbeltCalls(ctx, &storage.ListToolbeltCallsParams{Execution: a.Execution.ID, Kind: storage.ToolbeltRejected})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		op    string
		epoch int64
		token string
	}{{"emit", a.Execution.Epoch, a.TokenID}, {"toolbelt.guidance", a.Execution.Epoch, a.TokenID}, {"emit", b.Execution.Epoch, b.TokenID}}
	if len(recs) != len(want) {
		t.Fatalf("rejections recorded for the execution: %+v, want %d", recs, len(want))
	}
	for i, w := range want {
		r := recs[i]
		if r.Operation != w.op || r.Epoch != w.epoch || r.Token != w.token || r.Result != "forbidden" {
			t.Errorf("rejection %d: %+v, want %s at epoch %d with token %s, forbidden", i, r, w.op, w.epoch, w.token)
		}
	}
}
