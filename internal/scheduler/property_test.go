package scheduler_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/scheduler"
	"github.com/open-conduit/open-conduit/internal/scheduler/schedulertest"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/storagetest"
)

// The property's default number of checks keeps `go test -race ./...`
// quick. Run more with -rapid.checks=N (or RAPID_CHECKS=N), for example
//
//	go test ./internal/scheduler -run TestKernelProperty -rapid.checks=2000
func propertyChecks() {
	set := os.Getenv("RAPID_CHECKS") != ""
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set {
		n := 30
		if raceEnabled {
			n = 6
		}
		_ = flag.Set("rapid.checks", fmt.Sprint(n))
	}
}

// handle is an (execution, epoch) the model has seen act.
type handle struct {
	exe   string
	epoch int64
}

// model drives the kernel with random interleavings and checks the
// invariants after every step.
type model struct {
	t       *rapid.T
	h       *harness
	ctx     context.Context
	works   []string
	keys    []string
	handles []handle
	segs    map[handle]*schedulertest.Segment
	// acked is the last input position acknowledged per Work; inputs the
	// event ids queued per Work, as seen.
	acked  map[string]int64
	inputs map[string][]string
	owners int
}

func (m *model) executor(name string) *schedulertest.Executor {
	switch name {
	case "plain":
		return m.h.plain
	case "resumer":
		return m.h.resumer
	}
	return m.h.silent
}

// quiesce waits until every segment the scheduler observes has started in
// its executor (or, when it is being stopped, has reported), so that each
// step sees a settled state and the run is reproducible.
func (m *model) quiesce() {
	for _, ts := range m.h.s.Tracked() {
		exe := m.h.execution(ts.ExecutionID)
		k := handle{ts.ExecutionID, ts.Epoch}
		if ts.Kind != "stop" {
			seg := m.executor(exe.Executor).Await(m.t, ts.ExecutionID, ts.Epoch)
			m.segs[k] = seg
			if !slices.Contains(m.handles, k) {
				m.handles = append(m.handles, k)
			}
		}
		if ts.Kind == "stop" || ts.Stopping {
			m.h.waitEpoch(ts.ExecutionID, ts.Epoch)
		}
	}
}

// live lists the segments the scheduler observes that have not ended.
func (m *model) live() []handle {
	var out []handle
	for _, ts := range m.h.s.Tracked() {
		k := handle{ts.ExecutionID, ts.Epoch}
		if seg := m.segs[k]; seg != nil && !seg.Done() {
			out = append(out, k)
		}
	}
	return out
}

type snapshot struct {
	exeRev, workRev, seq int64
	exeState             storage.ExecutionState
}

func (m *model) snap(exeID string) snapshot {
	e := m.h.execution(exeID)
	w := m.h.work(e.Work)
	seq, _ := m.h.store.LastSeq(m.ctx)
	return snapshot{e.Revision, w.Revision, seq, e.State}
}

func (m *model) check() {
	t, ctx, st := m.t, m.ctx, m.h.store
	exes, err := st.ListExecutions(ctx, &storage.ListExecutionsParams{Page: storage.Page{Limit: storage.MaxLimit}})
	if err != nil {
		t.Fatal(err)
	}
	liveByWork := map[string]int{}
	current := map[string]storage.Execution{}
	for _, e := range exes {
		current[e.ID] = e
		if e.Live() {
			liveByWork[e.Work]++
		}
	}
	// At most one live execution per Work, and at most one live epoch per
	// execution: the lease guard admits exactly the current running epoch.
	for w, n := range liveByWork {
		if n > 1 {
			t.Fatalf("Work %s has %d live executions", w, n)
		}
	}
	admitted := map[string]int{}
	for _, hd := range m.handles {
		if _, err := m.h.rt.LeaseGuard(ctx, st, hd.exe, hd.epoch, m.h.owner); err == nil {
			admitted[hd.exe]++
			if e := current[hd.exe]; e.Epoch != hd.epoch {
				t.Fatalf("the lease guard admits epoch %d of %s, whose live epoch is %d", hd.epoch, hd.exe, e.Epoch)
			}
		}
	}
	for exe, n := range admitted {
		if n > 1 {
			t.Fatalf("%d epochs of %s are admitted", n, exe)
		}
	}
	for _, ts := range m.h.s.Tracked() {
		if e := current[ts.ExecutionID]; e.Epoch != ts.Epoch {
			t.Fatalf("the scheduler observes epoch %d of %s, whose live epoch is %d", ts.Epoch, ts.ExecutionID, e.Epoch)
		}
	}
	// Inputs: never lost (what was queued stays, positions 1..n), never
	// delivered twice (the acknowledged watermark only grows, and each
	// attempt acknowledges from where the last one stopped).
	for _, id := range m.works {
		w := m.h.work(id)
		ins, err := st.ListInputs(ctx, &storage.ListInputsParams{Work: id, Limit: storage.MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(ins)) != w.InputCount {
			t.Fatalf("Work %s counts %d inputs and lists %d", id, w.InputCount, len(ins))
		}
		var evs []string
		for i, in := range ins {
			if in.Position != int64(i+1) {
				t.Fatalf("Work %s inputs skip a position: %+v", id, ins)
			}
			evs = append(evs, in.Event)
		}
		if prev := m.inputs[id]; len(evs) < len(prev) || !slices.Equal(evs[:len(prev)], prev) {
			t.Fatalf("Work %s lost inputs: had %v, has %v", id, prev, evs)
		}
		m.inputs[id] = evs
		if w.InputWatermark < m.acked[id] || w.InputWatermark > w.InputCount {
			t.Fatalf("Work %s acknowledged %d after %d (of %d): an input was given twice", id, w.InputWatermark, m.acked[id], w.InputCount)
		}
		m.acked[id] = w.InputWatermark
		if w.State == storage.WorkRunning {
			e, err := st.GetLiveExecution(ctx, id)
			if err != nil || (e.State != storage.ExecutionRunning && e.State != storage.ExecutionStopping) {
				t.Fatalf("running Work %s has no running attempt: %+v, %v", id, e, err)
			}
		}
		if w.State == storage.WorkWaiting {
			if _, err := st.GetActiveWait(ctx, id); err != nil {
				t.Fatalf("waiting Work %s has no active Wait: %v", id, err)
			}
		}
		if w.State.Terminal() {
			if keys, _ := st.ListWorkKeys(ctx, id); len(keys) > 0 {
				t.Fatalf("finished Work %s still owns %v", id, keys)
			}
		}
	}
}

func (m *model) pickWork(t *rapid.T) (string, bool) {
	if len(m.works) == 0 {
		return "", false
	}
	return rapid.SampledFrom(m.works).Draw(t, "work"), true
}

func (m *model) refreshWorks() {
	ws, err := m.h.store.ListWork(m.ctx, &storage.ListWorkParams{Page: storage.Page{Limit: storage.MaxLimit}})
	if err != nil {
		m.t.Fatal(err)
	}
	m.works = m.works[:0]
	for _, w := range ws {
		m.works = append(m.works, w.ID)
	}
}

func (m *model) actions() map[string]func(*rapid.T) {
	h := m.h
	return map[string]func(*rapid.T){
		"create": func(t *rapid.T) {
			binding := rapid.SampledFrom([]string{"b1", "br"}).Draw(t, "binding")
			var keys []string
			if rapid.Bool().Draw(t, "keyed") {
				keys = []string{rapid.SampledFrom(m.keys).Draw(t, "key")}
			}
			_, err := h.ctl.CreateWork(operator, kernel.CreateWorkRequest{Scope: "s1", Binding: binding, Keys: keys})
			if err != nil && kernel.CodeOf(err) != "key_taken" {
				t.Fatal(err)
			}
		},
		"emit": func(t *rapid.T) {
			typ := rapid.SampledFrom([]string{"in.note", "go.start", "ev.a", "ev.b"}).Draw(t, "type")
			key := rapid.SampledFrom(append(append([]string{}, m.keys...), m.works...)).Draw(t, "key")
			if _, err := h.ctl.Emit(operator, kernel.EmitRequest{Scope: "s1", Type: typ, CorrelationKey: key}); err != nil {
				t.Fatal(err)
			}
		},
		"tick": func(t *rapid.T) {
			h.tick()
			m.quiesce()
		},
		"heartbeat": func(t *rapid.T) {
			if _, err := h.s.Heartbeat(m.ctx); err != nil {
				t.Fatal(err)
			}
			m.quiesce()
		},
		"advance": func(t *rapid.T) {
			h.clock.Advance(time.Duration(rapid.IntRange(1, 45).Draw(t, "seconds")) * time.Second)
		},
		"expire": func(t *rapid.T) {
			// Every lease lapses and the next tick recovers the attempts.
			h.clock.Advance(31 * time.Second)
			h.tick()
			m.quiesce()
		},
		"finish": func(t *rapid.T) {
			live := m.live()
			if len(live) == 0 {
				t.Skip("nothing running")
			}
			k := rapid.SampledFrom(live).Draw(t, "segment")
			out := rapid.SampledFrom([]executor.Outcome{executor.Succeeded, executor.Failed, executor.Suspended, executor.Cancelled}).Draw(t, "outcome")
			m.segs[k].Finish(executor.Result{Outcome: out})
			h.waitEpoch(k.exe, k.epoch)
		},
		"declare": func(t *rapid.T) {
			live := m.live()
			if len(live) == 0 {
				t.Skip("nothing running")
			}
			k := rapid.SampledFrom(live).Draw(t, "segment")
			var d kernel.Declaration
			if rapid.IntRange(0, 3).Draw(t, "kind") == 0 {
				d.Outcome = &kernel.OutcomeSpec{Outcome: rapid.SampledFrom([]storage.WorkState{storage.WorkSucceeded, storage.WorkFailed}).Draw(t, "outcome")}
			} else {
				d.Wait = &kernel.WaitSpec{Types: []string{rapid.SampledFrom([]string{"ev.a", "ev.b"}).Draw(t, "wait type")}}
				if rapid.Bool().Draw(t, "timeout") {
					d.Wait.Timeout = time.Duration(rapid.IntRange(10, 120).Draw(t, "timeout s")) * time.Second
				}
				if rapid.Bool().Draw(t, "explicit key") {
					d.Wait.Keys = []string{rapid.SampledFrom(m.keys).Draw(t, "wait key")}
				}
			}
			_ = h.store.WithTx(m.ctx, func(tx storage.Tx) error {
				if _, err := h.rt.LeaseGuard(m.ctx, tx, k.exe, k.epoch, h.owner); err != nil {
					return err
				}
				return h.rt.Declare(m.ctx, tx, k.exe, k.epoch, d)
			})
		},
		"stale": func(t *rapid.T) {
			// Every superseded (or no longer running) epoch the model has
			// seen tries to complete and to declare, as a zombie would.
			n := 0
			for _, k := range m.handles {
				e := h.execution(k.exe)
				if k.epoch == e.Epoch && (e.State == storage.ExecutionRunning || e.State == storage.ExecutionStopping) {
					continue
				}
				n++
				before := m.snap(k.exe)
				if err := h.s.Complete(m.ctx, k.exe, k.epoch, executor.Result{Outcome: executor.Failed, Message: "zombie"}); err == nil {
					t.Fatalf("Complete of superseded epoch %d of %s (now %s at %d) was accepted", k.epoch, k.exe, e.State, e.Epoch)
				}
				derr := h.store.WithTx(m.ctx, func(tx storage.Tx) error {
					return h.rt.Declare(m.ctx, tx, k.exe, k.epoch, kernel.Declaration{Outcome: &kernel.OutcomeSpec{Outcome: storage.WorkSucceeded}})
				})
				if derr == nil {
					t.Fatalf("a declaration of superseded epoch %d of %s was accepted", k.epoch, k.exe)
				}
				if after := m.snap(k.exe); after != before {
					t.Fatalf("superseded epoch %d of %s had an effect: %+v -> %+v", k.epoch, k.exe, before, after)
				}
			}
			if n == 0 {
				t.Skip("no superseded epoch yet")
			}
		},
		"cancel_work": func(t *rapid.T) {
			id, ok := m.pickWork(t)
			if !ok {
				t.Skip("no Work")
			}
			if _, err := h.ctl.CancelWork(operator, kernel.ControlRequest{Target: id}); err != nil && kernel.CodeOf(err) != "work_state" {
				t.Fatal(err)
			}
		},
		"cancel_execution": func(t *rapid.T) {
			var live []string
			for _, hd := range m.handles {
				if e := h.execution(hd.exe); e.Epoch == hd.epoch && (e.State == storage.ExecutionRunning || e.State == storage.ExecutionParked) {
					live = append(live, hd.exe)
				}
			}
			if len(live) == 0 {
				t.Skip("no live execution")
			}
			if _, err := h.ctl.CancelExecution(operator, kernel.ControlRequest{Target: rapid.SampledFrom(live).Draw(t, "execution")}); err != nil {
				t.Fatal(err)
			}
		},
		"retry": func(t *rapid.T) {
			id, ok := m.pickWork(t)
			if !ok {
				t.Skip("no Work")
			}
			if _, err := h.ctl.Retry(operator, kernel.ControlRequest{Target: id}); err != nil && kernel.CodeOf(err) != "work_state" && kernel.CodeOf(err) != "key_taken" {
				t.Fatal(err)
			}
		},
		"wake": func(t *rapid.T) {
			id, ok := m.pickWork(t)
			if !ok {
				t.Skip("no Work")
			}
			typ := rapid.SampledFrom([]string{"ev.a", "ev.b"}).Draw(t, "type")
			if _, err := h.ctl.Wake(operator, kernel.WakeRequest{Scope: "s1", Key: id, Type: typ}); err != nil {
				t.Fatal(err)
			}
		},
		"restart": func(t *rapid.T) {
			m.owners++
			h.restart(fmt.Sprintf("daemon-%d", m.owners+1))
			if _, err := h.s.RecoverOrphans(m.ctx); err != nil {
				t.Fatal(err)
			}
			m.quiesce()
		},
		"": func(t *rapid.T) {
			m.refreshWorks()
			m.check()
		},
	}
}

// drain lets everything that runs finish and checks that every Work ends
// terminal, waiting, held or ready.
func (m *model) drain() {
	h := m.h
	for range 50 {
		for _, k := range m.live() {
			m.segs[k].Finish(executor.Result{Outcome: executor.Succeeded})
			h.waitEpoch(k.exe, k.epoch)
		}
		h.tick()
		m.quiesce()
		h.clock.Advance(10 * time.Second)
		if _, err := h.s.Heartbeat(m.ctx); err != nil {
			m.t.Fatal(err)
		}
		m.quiesce()
		if len(m.live()) == 0 && len(h.s.Tracked()) == 0 && !m.pending() {
			break
		}
	}
	m.refreshWorks()
	m.check()
	for _, id := range m.works {
		w := h.work(id)
		switch {
		case w.State.Terminal(), w.State == storage.WorkWaiting, w.State == storage.WorkReady && w.Held():
		default:
			m.t.Fatalf("after draining, Work %s is %s (held %q)", id, w.State, w.BlockedReason)
		}
	}
	leased, err := h.store.ListExecutions(m.ctx, &storage.ListExecutionsParams{States: []storage.ExecutionState{storage.ExecutionRunning, storage.ExecutionStopping}})
	if err != nil {
		m.t.Fatal(err)
	}
	for _, e := range leased {
		if w := h.work(e.Work); !w.Held() {
			m.t.Fatalf("after draining, execution %s of unheld Work %s is %s", e.ID, e.Work, e.State)
		}
	}
}

// pending reports whether something is left for the scheduler: claimable
// Work, or a leased attempt of an unheld Work (to recover).
func (m *model) pending() bool {
	if c, _ := m.h.store.ListClaimable(m.ctx, 1); len(c) > 0 {
		return true
	}
	leased, err := m.h.store.ListExecutions(m.ctx, &storage.ListExecutionsParams{States: []storage.ExecutionState{storage.ExecutionRunning, storage.ExecutionStopping}})
	if err != nil {
		m.t.Fatal(err)
	}
	for _, e := range leased {
		if !m.h.work(e.Work).Held() {
			return true
		}
	}
	return false
}

func runProperty(t *testing.T, wrap func(storage.Store) storage.Store) {
	base := t.TempDir()
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp(base, "check")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		h := buildHarness(rt, dir, func(o *scheduler.Options) { o.Limits.MaxRunning = 3 }, wrap)
		defer h.close()
		h.routes["s1"] = []kernel.Route{
			{ID: "start", MatchType: "go.*", Binding: "b1", Effect: kernel.EffectStart},
			{ID: "queue", MatchType: "in.*", Effect: kernel.EffectQueue},
		}
		m := &model{t: rt, h: h, ctx: context.Background(), keys: []string{"k/1", "k/2", "k/3"},
			segs: map[handle]*schedulertest.Segment{}, acked: map[string]int64{}, inputs: map[string][]string{}}
		rt.Repeat(m.actions())
		m.drain()
	})
}

// TestKernelProperty drives random interleavings of accept, claim,
// heartbeat, complete, lease expiry, recovery, adoption, cancel, wait,
// timer and wake against a real SQLite file, checking the invariants after
// every step.
func TestKernelProperty(t *testing.T) {
	propertyChecks()
	runProperty(t, nil)
}

// TestKernelPropertyBrokenChild runs the property against a store whose
// fences ignore the epoch. It only runs inside the negative control below.
func TestKernelPropertyBrokenChild(t *testing.T) {
	if os.Getenv("OC_PROPERTY_BROKEN") != "1" {
		t.Skip("run by TestKernelPropertyNegativeControl")
	}
	runProperty(t, storagetest.EpochBlind)
}

// TestKernelPropertyNegativeControl shows the property can fail: against
// the epoch-blind store a superseded attempt completes, and the property
// must catch it.
func TestKernelPropertyNegativeControl(t *testing.T) {
	if testing.Short() {
		t.Skip("the negative control runs the property in a child process")
	}
	// Long runs (80 steps on average) find the zombie in the first few
	// checks; the fixed seed makes the run, and its time, reproducible.
	// Any seed fails: drop -rapid.seed to see others.
	cmd := exec.Command(os.Args[0], "-test.run=^TestKernelPropertyBrokenChild$", "-test.timeout=5m",
		"-rapid.checks=300", "-rapid.steps=80", "-rapid.seed=11", "-rapid.nofailfile", "-rapid.shrinktime=1ns")
	cmd.Env = append(os.Environ(), "OC_PROPERTY_BROKEN=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("the property passed against the epoch-blind store (err %v):\n%s", err, out)
	}
	if !strings.Contains(string(out), "superseded") {
		t.Fatalf("the property failed, but not on the superseded epoch:\n%s", out)
	}
	t.Logf("the property failed as it must:\n%s", lastLines(string(out), 12))
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
