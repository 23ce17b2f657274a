package management_test

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/open-conduit/open-conduit/api"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/management"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
)

// lostRecord is Idempotency-Key history whose first Put fails, as a kill
// between an apply's commit and its key's record leaves it.
type lostRecord struct {
	management.IdempotencyStore
	failed atomic.Bool
}

func (l *lostRecord) Put(ctx context.Context, rec management.IdempotencyRecord) error {
	if l.failed.CompareAndSwap(false, true) {
		return errors.New("killed before the record was written")
	}
	return l.IdempotencyStore.Put(ctx, rec)
}

// A config apply that committed but whose Idempotency-Key record was never
// written is completed by its retry under the same key (the same
// generation, not 409 stale_generation); a different document at the
// same stale base is still refused.
func TestApplyRetryAfterALostRecordCompletesTheApply(t *testing.T) {
	s := mgmttest.StartStack(t, mgmttest.StackOptions{})
	h := mgmttest.Start(t, mgmttest.Options{
		Idempotency: &lostRecord{IdempotencyStore: management.StoreIdempotency(s.Store)}, Health: s.Config, Clock: s.Clock,
		Routes: s.Resources.Routes(),
		Authenticated: func(ctx context.Context, p management.Principal) context.Context {
			return kernel.WithActor(ctx, p.Actor())
		},
	})
	base := s.Config.Active().Generation
	body, _ := json.Marshal(map[string]any{"config": map[string]any{"version": 1, "scopes": map[string]any{"a": map[string]any{}}}, "expected_generation": base})
	key := map[string]string{"Idempotency-Key": "apply-once"}
	first := do(t, h, req{method: "POST", path: "/v1/config/apply", token: h.OwnerToken(t), body: string(body), header: key})
	expect(t, first, http.StatusOK, "")
	var applied api.Applied
	if err := json.Unmarshal(first.body, &applied); err != nil || applied.Generation != base+1 {
		t.Fatalf("first apply = %s (%v)", first.body, err)
	}

	retry := do(t, h, req{method: "POST", path: "/v1/config/apply", token: h.OwnerToken(t), body: string(body), header: key})
	expect(t, retry, http.StatusOK, "")
	var again api.Applied
	if err := json.Unmarshal(retry.body, &again); err != nil || again.Generation != applied.Generation || again.Hash != applied.Hash || again.PreviousGeneration != base {
		t.Fatalf("retry = %s (%v), want the same apply %+v", retry.body, err, applied)
	}
	if got := s.Config.Active().Generation; got != base+1 {
		t.Fatalf("active generation %d after the retry, want %d (nothing published twice)", got, base+1)
	}
	// Now recorded: a third try replays it.
	if third := do(t, h, req{method: "POST", path: "/v1/config/apply", token: h.OwnerToken(t), body: string(body), header: key}); third.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("third try was not replayed: %d %s", third.status, third.body)
	}

	other, _ := json.Marshal(map[string]any{"config": map[string]any{"version": 1, "scopes": map[string]any{"b": map[string]any{}}}, "expected_generation": base})
	stale := do(t, h, req{method: "POST", path: "/v1/config/apply", token: h.OwnerToken(t), body: string(other), header: map[string]string{"Idempotency-Key": "apply-other"}})
	expect(t, stale, http.StatusConflict, "stale_generation")
}
