package kernel_test

import (
	"context"
	"testing"

	"github.com/open-conduit/open-conduit/internal/kernel"
)

// An ingress's Event is a root from its source, with no actor, routed at
// once; its delivery is accepted once.
func TestIngest(t *testing.T) {
	b := setup(t)
	b.routes["s1"] = []kernel.Route{{ID: "r", MatchType: "github.issues.*", MatchSource: "github.webhook", Binding: "b1", Effect: kernel.EffectStart}}
	ctx := kernel.WithActor(context.Background(), "operator:ann") // dropped: an ingress has no actor
	req := kernel.IngestRequest{Source: "github.webhook", Scope: "s1", Type: "github.issues.opened", CorrelationKey: "o/r#1", Data: []byte(`{"n":1}`), DeliveryID: "d-1"}
	res, err := b.ctl.Ingest(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Event.Source != "github.webhook" || res.Event.Actor != "" || res.Event.Parent != "" || res.Event.Root != res.Event.ID || res.Decision.Started == "" {
		t.Fatalf("ingest = %+v", res)
	}
	again, err := b.ctl.Ingest(ctx, req)
	if err != nil || again.Event.ID != res.Event.ID || !again.Event.Replayed || again.Decision.Started != "" {
		t.Fatalf("redelivery = %+v, %v", again, err)
	}
	// The same delivery id from another source is another Event.
	other := req
	other.Source = "slack"
	if o, err := b.ctl.Ingest(ctx, other); err != nil || o.Event.ID == res.Event.ID {
		t.Fatalf("another source's delivery = %+v, %v", o, err)
	}
	bad := req
	bad.DeliveryID, bad.Source = "d-2", "core.host"
	_, err = b.ctl.Ingest(ctx, bad)
	mustCode(t, err, "invalid_event")
	bad.Source, bad.Type = "github.webhook", "core.work.finished"
	_, err = b.ctl.Ingest(ctx, bad)
	mustCode(t, err, "core_type_reserved")
	bad.Type, bad.Scope = "github.issues.opened", "nowhere"
	_, err = b.ctl.Ingest(ctx, bad)
	mustCode(t, err, "scope_inactive")
}
