package scheduler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/scheduler"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// The host side of the agent executors: the input Events and the session
// a segment is handed, the parking of a resume-capable executor's segment
// that ended normally on a declared wait, and the session and usage its
// results leave on the execution.

// segmentEventIDs lists a segment's Events as ids, and fails the test
// when one does not carry its stored Event field for field.
func segmentEventIDs(t *testing.T, h *harness, evs []executor.Event) []string {
	t.Helper()
	var out []string
	for _, ev := range evs {
		st, err := h.store.GetEvent(context.Background(), ev.ID)
		if err != nil {
			t.Fatal(err)
		}
		data := st.Data
		if len(data) == 0 {
			data = json.RawMessage("null")
		}
		if ev.Seq != st.Seq || ev.Type != st.Type || ev.Source != st.Source || ev.Scope != st.Scope || ev.CorrelationKey != st.CorrelationKey ||
			!ev.AcceptedAt.Equal(st.AcceptedAt) || !bytes.Equal(ev.Data, data) {
			t.Fatalf("segment event %+v, stored %+v", ev, st)
		}
		out = append(out, ev.ID)
	}
	return out
}

// inputIDs are the Work's input Events after position after, in order.
func inputIDs(t *testing.T, h *harness, workID string, after int64) []string {
	t.Helper()
	ins, err := h.store.ListInputs(context.Background(), &storage.ListInputsParams{Work: workID, AfterPosition: after, Limit: storage.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, in := range ins {
		out = append(out, in.Event)
	}
	return out
}

func TestResumeCapableSegmentThatSucceededParksAndResumesItsSession(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	w := h.create("br")
	h.tick()
	seg := h.resumer.Next(t)
	created := inputIDs(t, h, w.ID, 0)
	if got := segmentEventIDs(t, h, seg.Req.Events); len(created) != 1 || !reflect.DeepEqual(got, created) || seg.Req.Session != "" {
		t.Fatalf("a new attempt is given events %v and session %q, want its inputs %v and none", got, seg.Req.Session, created)
	}
	h.declare(seg, kernel.Declaration{Wait: &kernel.WaitSpec{Types: []string{"review.done"}}})
	u1 := &executor.Usage{InputTokens: 1000, OutputTokens: 200, CacheReadTokens: 30, CacheCreationTokens: 40, CostUSD: 0.5, Turns: 3}
	// An agent's turn that ended normally after declaring its wait.
	h.finish(seg, executor.Result{Outcome: executor.Succeeded, Session: "sess-1", Usage: u1})
	exe := h.execution(seg.Req.ExecutionID)
	if exe.State != storage.ExecutionParked || h.work(w.ID).State != storage.WorkWaiting {
		t.Fatalf("a resume-capable executor's succeeded segment with a declared wait: execution %s, Work %s; want parked, waiting", exe.State, h.work(w.ID).State)
	}
	if exe.Session != "sess-1" || exe.Usage == nil || *exe.Usage != (storage.Usage{InputTokens: 1000, OutputTokens: 200, CacheReadTokens: 30, CacheCreationTokens: 40, CostUSD: 0.5, Turns: 3}) {
		t.Fatalf("parked execution: session %q usage %+v", exe.Session, exe.Usage)
	}
	wake, err := h.ctl.Wake(operator, kernel.WakeRequest{Scope: "s1", Key: w.ID, Type: "review.done", Data: json.RawMessage(`{"verdict":"ok"}`)})
	if err != nil {
		t.Fatal(err)
	}
	h.tick()
	res := h.resumer.Next(t)
	if res.Kind != "resume" || res.Req.Session != "sess-1" {
		t.Fatalf("resume = %s with session %q, want resume of sess-1", res.Kind, res.Req.Session)
	}
	if got := segmentEventIDs(t, h, res.Req.Events); !reflect.DeepEqual(got, []string{wake.Event.ID}) || string(res.Req.Events[0].Data) != `{"verdict":"ok"}` {
		t.Fatalf("a resume is given events %v, want only the one that woke it (%s)", got, wake.Event.ID)
	}
	// The second segment names no session: the recorded one stays, and
	// its usage is added.
	h.finish(res, executor.Result{Outcome: executor.Succeeded, Usage: &executor.Usage{InputTokens: 5, OutputTokens: 6, CacheReadTokens: 7, CacheCreationTokens: 8, CostUSD: 0.25, Turns: 1}})
	fin := h.execution(exe.ID)
	want := storage.Usage{InputTokens: 1005, OutputTokens: 206, CacheReadTokens: 37, CacheCreationTokens: 48, CostUSD: 0.75, Turns: 4}
	if fin.State != storage.ExecutionFinished || fin.Session != "sess-1" || fin.Usage == nil || *fin.Usage != want {
		t.Fatalf("finished execution: %s session %q usage %+v, want finished, sess-1, %+v", fin.State, fin.Session, fin.Usage, want)
	}
	if got := h.work(w.ID); got.State != storage.WorkSucceeded {
		t.Fatalf("work = %s", got.State)
	}
	if n, _ := h.store.CountLeased(ctx, "daemon-1"); n != 0 {
		t.Fatalf("leases held after the end: %d", n)
	}
}

func TestExecutorWithoutResumeEndsOnADeclaredWait(t *testing.T) {
	h := newHarness(t, nil)
	w := h.create("b1")
	h.tick()
	seg := h.plain.Next(t)
	h.declare(seg, kernel.Declaration{Wait: &kernel.WaitSpec{Types: []string{"review.done"}}})
	h.finish(seg, executor.Result{Outcome: executor.Succeeded, Session: "sess-plain"})
	exe := h.execution(seg.Req.ExecutionID)
	if exe.State != storage.ExecutionFinished || exe.Result != storage.ResultSucceeded || h.work(w.ID).State != storage.WorkWaiting {
		t.Fatalf("a plain executor's segment on a declared wait: execution %s %s, Work %s; want finished succeeded, waiting", exe.State, exe.Result, h.work(w.ID).State)
	}
	wake, err := h.ctl.Wake(operator, kernel.WakeRequest{Scope: "s1", Key: w.ID, Type: "review.done"})
	if err != nil {
		t.Fatal(err)
	}
	h.tick()
	next := h.plain.Next(t)
	if next.Kind != "run" || next.Req.ExecutionID == exe.ID || next.Req.Session != "" {
		t.Fatalf("after the wake: %s of %s with session %q, want a new run without one", next.Kind, next.Req.ExecutionID, next.Req.Session)
	}
	all := inputIDs(t, h, w.ID, 0)
	if got := segmentEventIDs(t, h, next.Req.Events); len(all) != 2 || all[1] != wake.Event.ID || !reflect.DeepEqual(got, all) {
		t.Fatalf("a new attempt is given %v, want every input %v", got, all)
	}
}

func TestSegmentEventsAreTheNewestBounded(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	w := h.create("b1")
	extra := scheduler.MaxSegmentEvents + 20
	if err := h.store.WithTx(ctx, func(tx storage.Tx) error {
		for i := range extra {
			ev, err := tx.InsertEvent(ctx, &storage.InsertEventParams{ID: fmt.Sprintf("evt_in_%03d", i), Type: "test.input", Source: "test", Scope: "s1",
				Work: w.ID, Root: fmt.Sprintf("evt_in_%03d", i), AcceptedAt: h.clock.Now()})
			if err != nil {
				return err
			}
			if _, err := tx.QueueInput(ctx, &storage.QueueInputParams{Work: w.ID, Event: ev.ID, At: h.clock.Now()}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	h.tick()
	seg := h.plain.Next(t)
	all := inputIDs(t, h, w.ID, 0)
	if len(all) != extra+1 {
		t.Fatalf("%d inputs queued, want %d", len(all), extra+1)
	}
	got := segmentEventIDs(t, h, seg.Req.Events)
	if want := all[len(all)-scheduler.MaxSegmentEvents:]; !reflect.DeepEqual(got, want) {
		t.Fatalf("a segment is given %d events from %v, want the newest %d, oldest first", len(got), got[:1], len(want))
	}
}

func TestRecoveryIsHandedTheSessionAndNoEvents(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	w := h.create("br")
	h.tick()
	seg := h.resumer.Next(t)
	h.declare(seg, kernel.Declaration{Wait: &kernel.WaitSpec{Types: []string{"review.done"}}})
	h.finish(seg, executor.Result{Outcome: executor.Suspended, Session: "sess-r"})
	if _, err := h.ctl.Wake(operator, kernel.WakeRequest{Scope: "s1", Key: w.ID, Type: "review.done"}); err != nil {
		t.Fatal(err)
	}
	h.tick()
	res := h.resumer.Next(t)
	if res.Kind != "resume" || len(res.Req.Events) != 1 {
		t.Fatalf("resume = %s with %d events", res.Kind, len(res.Req.Events))
	}
	// The daemon dies while the resumed segment runs; the next one adopts
	// it.
	h.restart("daemon-2")
	if _, err := h.s.RecoverOrphans(ctx); err != nil {
		t.Fatal(err)
	}
	rec := h.resumer.Await(t, res.Req.ExecutionID, res.Req.Epoch+1)
	if rec.Kind != "recover" || rec.Req.Session != "sess-r" || len(rec.Req.Events) != 0 {
		t.Fatalf("recovery = %s with session %q and %d events, want recover of sess-r with none", rec.Kind, rec.Req.Session, len(rec.Req.Events))
	}
	h.finish(rec, executor.Result{Outcome: executor.Succeeded, Session: "sess-r2"})
	if got := h.execution(rec.Req.ExecutionID); got.Session != "sess-r2" || got.Usage != nil {
		t.Fatalf("after the recovered segment: session %q usage %+v, want sess-r2 and none", got.Session, got.Usage)
	}
}

func TestFailedSegmentStillRecordsSessionAndUsage(t *testing.T) {
	h := newHarness(t, nil)
	h.create("br")
	h.tick()
	seg := h.resumer.Next(t)
	long := strings.Repeat("s", scheduler.MaxSessionLength+1)
	// A session not fit to record is dropped; counts below zero and a
	// cost that is no number count as zero.
	nan := 0.0
	nan /= nan
	h.finish(seg, executor.Result{Outcome: executor.Failed, Message: "boom", Session: long,
		Usage: &executor.Usage{InputTokens: 10, OutputTokens: -4, CostUSD: nan, Turns: 2}})
	exe := h.execution(seg.Req.ExecutionID)
	if exe.Result != storage.ResultFailed || exe.Session != "" || exe.Usage == nil || *exe.Usage != (storage.Usage{InputTokens: 10, Turns: 2}) {
		t.Fatalf("failed execution: %s session %q usage %+v", exe.Result, exe.Session, exe.Usage)
	}
}

func TestCancelledAgentRecordsUsageWithItsStop(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	w := h.create("br")
	h.tick()
	seg := h.resumer.Next(t)
	if _, err := h.ctl.CancelWork(operator, kernel.ControlRequest{Target: w.ID}); err != nil {
		t.Fatal(err)
	}
	// The agent's own call sees its end and reports what it used.
	seg.Finish(executor.Result{Outcome: executor.Cancelled, ExitCode: -1, Session: "sess-c", Usage: &executor.Usage{OutputTokens: 9, Turns: 1}})
	h.settle(seg)
	if _, err := h.s.ApplyResults(ctx); err != nil {
		t.Fatal(err)
	}
	exe := h.execution(seg.Req.ExecutionID)
	if exe.State != storage.ExecutionFinished || exe.Result != storage.ResultCancelled || exe.Session != "sess-c" || exe.Usage == nil || exe.Usage.OutputTokens != 9 {
		t.Fatalf("stopped execution: %s %s session %q usage %+v", exe.State, exe.Result, exe.Session, exe.Usage)
	}
}

// An agent's transcript is stored and listed beside its log, and bounded
// like it: past the limit it is cut at its last whole line.
func TestTranscriptArtifactIsStoredBesideTheLog(t *testing.T) {
	const limit = 64
	h := newHarness(t, func(o *scheduler.Options) { o.ArtifactLimit = limit })
	ctx := context.Background()
	w := h.create("br")
	h.tick()
	seg := h.resumer.Next(t)
	dir := t.TempDir()
	logPath, short, long := filepath.Join(dir, "log"), filepath.Join(dir, "short.jsonl"), filepath.Join(dir, "long.jsonl")
	lines := `{"type":"system","n":1}` + "\n" + `{"type":"assistant","n":2}` + "\n" + `{"type":"result","n":3}` + "\n"
	for p, b := range map[string]string{logPath: "agent log\n", short: `{"type":"result"}` + "\n", long: lines} {
		if err := os.WriteFile(p, []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	h.finish(seg, executor.Result{Outcome: executor.Succeeded, Artifacts: []executor.Artifact{
		{Name: "log", MediaType: "text/plain; charset=utf-8", Path: logPath},
		{Name: "transcript", MediaType: "application/x-ndjson", Path: short},
		{Name: "transcript-long", MediaType: "application/x-ndjson", Path: long},
	}})
	arts, err := h.store.ListArtifacts(ctx, &storage.ListArtifactsParams{Work: w.ID})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]storage.Artifact{}
	for _, a := range arts {
		got[a.Name] = a
	}
	if len(arts) != 3 || got["log"].MediaType != "text/plain; charset=utf-8" || got["transcript"].MediaType != "application/x-ndjson" {
		t.Fatalf("artifacts = %+v, want the log and both transcripts", arts)
	}
	read := func(a storage.Artifact) string {
		t.Helper()
		_, f, err := h.arts.Open(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var b bytes.Buffer
		if _, err := b.ReadFrom(f); err != nil {
			t.Fatal(err)
		}
		if int64(b.Len()) != a.Size || a.Execution != seg.Req.ExecutionID {
			t.Fatalf("artifact %s: %d bytes, metadata %+v", a.Name, b.Len(), a)
		}
		return b.String()
	}
	if b := read(got["transcript"]); b != `{"type":"result"}`+"\n" {
		t.Fatalf("transcript bytes %q", b)
	}
	if b, want := read(got["transcript-long"]), lines[:strings.LastIndex(lines[:limit], "\n")+1]; b != want || len(b) > limit {
		t.Fatalf("a transcript past the limit is stored as %q, want its whole lines within %d bytes, %q", b, limit, want)
	}
	if b := read(got["log"]); b != "agent log\n" {
		t.Fatalf("log bytes %q", b)
	}
}
