package wire_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/wire"
	"github.com/open-conduit/open-conduit/internal/wire/wiretest"
)

// These tests pin the bodies the conversions send: each record and result
// is tried filled (every field set, by reflection, so a field added to a
// record later is covered too), zero and with empty, non-nil lists, and
// its body must equal the golden one in testdata/. The golden bodies were
// written while the tests still compared each conversion with the storage
// record or the response struct the handlers sent before; a change there
// is a change of the wire.

func TestWireRecords(t *testing.T) {
	g := wiretest.NewGolden(t)
	for name, e := range wiretest.Samples(func(e *storage.Event) { e.Data = json.RawMessage(`{}`) }) {
		g.Add("Event "+name, wire.Event(e))
	}
	for name, w := range wiretest.Samples(func(w *storage.Work) {
		w.Grants, w.OutcomeData, w.State = []string{}, json.RawMessage(`{}`), storage.WorkReady
	}) {
		g.Add("Work "+name, wire.Work(w))
	}
	for name, e := range wiretest.Samples(func(e *storage.Execution) {
		zero := 0
		e.ExitCode, e.Result, e.Session, e.Usage = &zero, storage.ResultNone, "", &storage.Usage{}
	}) {
		g.Add("Execution "+name, wire.Execution(e))
	}
	for name, w := range wiretest.Samples(func(w *storage.Wait) { w.Types, w.Keys, w.TimeoutAt = []string{}, []string{}, time.Time{} }) {
		g.Add("Wait "+name, wire.Wait(w))
	}
	for name, a := range wiretest.Samples[storage.Artifact](nil) {
		g.Add("Artifact "+name, wire.Artifact(a))
	}
	for name, c := range wiretest.Samples(func(c *storage.ToolbeltCall) { c.Epoch, c.Replayed = 0, false }) {
		g.Add("ToolbeltCall "+name, wire.ToolbeltCall(c))
	}
	for name, c := range wiretest.Samples[storage.EgressConnection](nil) {
		g.Add("EgressConnection "+name, wire.EgressConnection(c))
	}
}

func TestWireLists(t *testing.T) {
	g := wiretest.NewGolden(t)
	var w storage.Work
	wiretest.Fill(&w)
	for name, p := range map[string]api.Page[storage.Work]{
		"empty": {Items: []storage.Work{}},
		"last":  {Items: []storage.Work{w, {}}},
		"more":  {Items: []storage.Work{w}, NextCursor: "cursor"},
	} {
		g.Add("Page "+name, wire.Page(p, wire.Work))
	}
	events := api.Page[storage.Event]{Items: []storage.Event{{Seq: 1}}, NextCursor: "c"}
	g.Add("Page<Event>", wire.Page(events, wire.Event))
}

func TestWireResults(t *testing.T) {
	g := wiretest.NewGolden(t)
	for name, d := range wiretest.Samples(func(d *kernel.Decision) { d.Routes, d.OtherWakes = []kernel.RouteVerdict{}, []kernel.Wake{} }) {
		g.Add("Trace "+name, wire.Trace("setup", 3, d))
	}
	for name, res := range wiretest.Samples[kernel.CreateWorkResult](nil) {
		g.Add("CreatedWork "+name, wire.CreatedWork(res))
	}
	// The execution only when the control fenced one.
	for name, res := range wiretest.Samples(func(r *kernel.ControlResult) { r.Execution = storage.Execution{} }) {
		g.Add("Controlled "+name, wire.Controlled(res))
	}
	for name, res := range wiretest.Samples[kernel.WakeResult](nil) {
		g.Add("Woken "+name, wire.Woken(res))
	}
	for name, res := range wiretest.Samples[kernel.EmitResult](nil) {
		g.Add("Emitted "+name, wire.Emitted(res))
	}
}

// TestPageNeverNil: an empty or nil page is sent as an empty list.
func TestPageNeverNil(t *testing.T) {
	for _, p := range []api.Page[storage.Event]{{}, {Items: []storage.Event{}}} {
		if got := wiretest.Marshal(t, wire.Page(p, wire.Event)); got != `{"items":[]}` {
			t.Errorf("page %+v is sent as %s", p, got)
		}
	}
}
