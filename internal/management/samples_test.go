package management_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
)

// samplesConfig is StackConfig with two samples on the setup scope's
// route.
var samplesConfig = bytes.Replace(mgmttest.StackConfig,
	[]byte(`"routes": [{"id": "deploys", "match": {"type": "deploy.*"}, "binding": "shell"}]`),
	[]byte(`"routes": [{"id": "deploys", "match": {"type": "deploy.*"}, "binding": "shell", "samples": {
        "deploy-main": {"type": "deploy.requested", "correlation_key": "deploy/main", "data": {"ref": "main"}},
        "rollback": {"type": "deploy.rollback"}}}]`), 1)

// TestRouteSamples: a route's samples are listed in route order with the
// route that offers them, and a trace names one by name, its fields
// replaced by those given; an unknown name is refused.
func TestRouteSamples(t *testing.T) {
	if bytes.Equal(samplesConfig, mgmttest.StackConfig) {
		t.Fatal("the test configuration has no samples: StackConfig's route changed")
	}
	ctx := context.Background()
	s := mgmttest.StartStack(t, mgmttest.StackOptions{Default: samplesConfig})
	c := s.Client
	list, err := c.RouteSamples(ctx, "setup")
	if err != nil || len(list.Items) != 2 {
		t.Fatalf("samples = %+v, %v", list, err)
	}
	first := list.Items[0]
	var ev client.TraceRequest
	if err := json.Unmarshal(first.Event, &ev); err != nil {
		t.Fatal(err)
	}
	if first.Name != "deploy-main" || first.Route != "deploys" || ev.Type != "deploy.requested" || ev.Source != "core.manual" ||
		ev.CorrelationKey != "deploy/main" || string(ev.Data) != `{"ref":"main"}` || list.Items[1].Name != "rollback" {
		t.Fatalf("samples = %+v (event %+v)", list.Items, ev)
	}
	if team, err := c.RouteSamples(ctx, "team"); err != nil || len(team.Items) != 0 {
		t.Fatalf("a scope without samples: %+v, %v", team, err)
	}

	tr, err := c.TraceRoute(ctx, "setup", client.TraceRequest{Sample: "deploy-main"})
	if err != nil || tr.Decision.Effect != "start" || tr.Decision.Route != "deploys" || tr.Decision.Binding != "shell" {
		t.Fatalf("trace of a sample = %+v, %v", tr, err)
	}
	// The sample's fields give way to those sent: another type, which the
	// route does not match.
	tr, err = c.TraceRoute(ctx, "setup", client.TraceRequest{Sample: "deploy-main", Type: "note.added"})
	if err != nil || tr.Decision.Effect != "unmatched" {
		t.Fatalf("trace of a sample with its type replaced = %+v, %v", tr, err)
	}
	if _, err := c.TraceRoute(ctx, "setup", client.TraceRequest{Sample: "nope"}); !client.IsInvalidRequest(err) {
		t.Fatalf("trace of an unknown sample: %v", err)
	}
	if n, _ := c.ListEvents(ctx, client.EventFilter{}); len(n.Items) != 0 {
		t.Errorf("a sample's trace recorded events: %+v", n.Items)
	}
}
