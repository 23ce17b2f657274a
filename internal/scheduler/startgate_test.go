package scheduler_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/scheduler"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// gateLog records which start gates were asked, and what.
type gateLog struct {
	mu    sync.Mutex
	asked []string
	reqs  []extension.StartRequest
}

func (l *gateLog) gate(name string, answer func(extension.StartRequest) (*extension.WaitPlan, error)) scheduler.StartGate {
	return scheduler.StartGate{Registration: name, Gate: extension.StartGateFunc(func(_ context.Context, req extension.StartRequest) (*extension.WaitPlan, error) {
		l.mu.Lock()
		l.asked = append(l.asked, name)
		l.reqs = append(l.reqs, req)
		l.mu.Unlock()
		return answer(req)
	})}
}

func (l *gateLog) names() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.asked, ",")
}

func (l *gateLog) last() extension.StartRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reqs[len(l.reqs)-1]
}

func allow(extension.StartRequest) (*extension.WaitPlan, error) { return nil, nil }

// withGates gives the scheduler the start gates (in the order given) and
// records the scopes and generations the port was asked for.
func withGates(asked *[]string, gates ...scheduler.StartGate) func(*scheduler.Options) {
	return func(o *scheduler.Options) {
		o.StartGates = func(scope string, generation int64) []scheduler.StartGate {
			*asked = append(*asked, scope+"@"+strconv.FormatInt(generation, 10))
			return gates
		}
	}
}

func lastInputType(t *testing.T, req extension.StartRequest) string {
	t.Helper()
	if len(req.Inputs) == 0 {
		return ""
	}
	return req.Inputs[len(req.Inputs)-1].Type
}

func TestStartGatesAllowInRegistrationNameOrder(t *testing.T) {
	var l gateLog
	var port []string
	h := newHarness(t, withGates(&port, l.gate("zeta", allow), l.gate("alpha", allow)))
	w := h.create("b1")
	h.tick()
	seg := h.plain.Next(t)
	if got := l.names(); got != "alpha,zeta" {
		t.Fatalf("gates asked %q, want alpha,zeta", got)
	}
	if len(port) != 1 || port[0] != "s1@1" {
		t.Fatalf("the port was asked for %v, want the scope at the attempt's generation", port)
	}
	req := l.last()
	if req.Scope != "s1" || req.Work != w.ID || req.Binding != "b1" || req.Generation != 1 {
		t.Fatalf("request = %+v", req)
	}
	if got := h.work(w.ID); got.State != storage.WorkRunning || got.Attempts != 1 || got.WaitReason != "" {
		t.Fatalf("work = %+v", got)
	}
	// A later attempt does not ask the gates again.
	h.finish(seg, executor.Result{Outcome: executor.Failed})
	if _, err := h.ctl.Retry(operator, kernel.ControlRequest{Target: w.ID}); err != nil {
		t.Fatal(err)
	}
	h.tick()
	h.plain.Next(t)
	if got := l.names(); got != "alpha,zeta" {
		t.Fatalf("a second attempt asked the gates again: %q", got)
	}
}

func TestStartGateParksUntilThePlansEvent(t *testing.T) {
	var l gateLog
	var port []string
	human := l.gate("human", func(req extension.StartRequest) (*extension.WaitPlan, error) {
		if lastInputType(t, req) == "human.approved" {
			return nil, nil
		}
		return &extension.WaitPlan{Types: []string{"human.approved"}, Timeout: time.Hour, Reason: "a person approves it\nfirst"}, nil
	})
	// The first gate parks: the one after it is asked only once it lets
	// the Work through.
	h := newHarness(t, withGates(&port, l.gate("later", allow), human))
	ctx := context.Background()
	w := h.create("b1")
	h.tick()
	if got := l.names(); got != "human" {
		t.Fatalf("gates asked %q, want human alone", got)
	}
	got := h.work(w.ID)
	if got.State != storage.WorkWaiting || got.Attempts != 0 || got.Held() || got.WaitReason != "start gate human: a person approves itfirst" {
		t.Fatalf("parked work = %+v", got)
	}
	if exes, _ := h.store.ListExecutions(ctx, &storage.ListExecutionsParams{Work: w.ID}); len(exes) != 0 {
		t.Fatalf("a parked Work has executions %+v", exes)
	}
	wt, err := h.store.GetActiveWait(ctx, w.ID)
	if err != nil || wt.Registration != "human" || wt.Execution != "" || wt.Timer == "" || !wt.OnWorkKeys || strings.Join(wt.Types, ",") != "human.approved" {
		t.Fatalf("wait = %+v, %v", wt, err)
	}
	// Nothing else wakes it, and nothing starts it meanwhile.
	if _, err := h.ctl.Wake(operator, kernel.WakeRequest{Scope: "s1", Key: w.ID, Type: "human.asked"}); err != nil {
		t.Fatal(err)
	}
	h.tick()
	if h.plain.TryNext() != nil || h.work(w.ID).State != storage.WorkWaiting {
		t.Fatal("a Work parked by a start gate started")
	}
	res, err := h.ctl.Wake(operator, kernel.WakeRequest{Scope: "s1", Key: w.ID, Type: "human.approved"})
	if err != nil || !res.Matched {
		t.Fatalf("wake = %+v, %v", res, err)
	}
	if got := h.work(w.ID); got.State != storage.WorkReady || got.WaitReason != "" {
		t.Fatalf("woken work = %+v", got)
	}
	h.tick()
	seg := h.plain.Next(t)
	if got := l.names(); got != "human,human,later" {
		t.Fatalf("gates asked %q", got)
	}
	if req := l.last(); lastInputType(t, req) != "human.approved" || req.Inputs[len(req.Inputs)-1].ID != res.Event.ID {
		t.Fatalf("the gates were not shown the event that woke the Work: %+v", req.Inputs)
	}
	if got := h.work(w.ID); got.State != storage.WorkRunning || got.Attempts != 1 || got.WaitReason != "" {
		t.Fatalf("work = %+v", got)
	}
	// The attempt is given the inputs the gate waited for.
	if e := h.execution(seg.Req.ExecutionID); e.InputWatermark != h.work(w.ID).InputCount {
		t.Fatalf("the attempt acknowledged %d of %d inputs", e.InputWatermark, h.work(w.ID).InputCount)
	}
	if wt, _ := h.store.GetWait(ctx, wt.ID); wt.State != storage.WaitSatisfied || wt.SatisfiedBy != res.Event.ID {
		t.Fatalf("wait = %+v", wt)
	}
}

func TestStartGateParkTimesOut(t *testing.T) {
	var l gateLog
	var port []string
	h := newHarness(t, withGates(&port, l.gate("human", func(req extension.StartRequest) (*extension.WaitPlan, error) {
		if lastInputType(t, req) == kernel.TypeWaitTimedOut {
			return nil, &extension.OperationError{Code: "approval_expired", Message: "no one approved the Work in time"}
		}
		return &extension.WaitPlan{Types: []string{"human.approved"}, Timeout: 10 * time.Minute}, nil
	})))
	ctx := context.Background()
	w := h.create("b1")
	h.tick()
	if got := h.work(w.ID); got.State != storage.WorkWaiting || got.WaitReason != "start gate human: it waits for the events its plan names" {
		t.Fatalf("parked work = %+v", got)
	}
	wt, _ := h.store.GetActiveWait(ctx, w.ID)
	h.clock.Advance(9 * time.Minute)
	h.tick()
	if got := h.work(w.ID); got.State != storage.WorkWaiting || l.names() != "human" {
		t.Fatalf("before its timeout: %+v, gates asked %q", got, l.names())
	}
	h.clock.Advance(2 * time.Minute)
	h.tick()
	got := h.work(w.ID)
	if got.State != storage.WorkFailed || got.Attempts != 0 || got.WaitReason != "" || got.OutcomeMessage != "no one approved the Work in time" ||
		string(got.OutcomeData) != `{"code":"approval_expired","gate":"human"}` {
		t.Fatalf("work after the timeout = %+v (data %s)", got, got.OutcomeData)
	}
	if l.names() != "human,human" {
		t.Fatalf("gates asked %q", l.names())
	}
	if wt, _ := h.store.GetWait(ctx, wt.ID); wt.State != storage.WaitTimedOut {
		t.Fatalf("wait = %+v", wt)
	}
	if h.plain.TryNext() != nil {
		t.Fatal("a refused Work started")
	}
}

func TestStartGateRefusesTheWork(t *testing.T) {
	var l gateLog
	var port []string
	refuse := true
	h := newHarness(t, withGates(&port, l.gate("policy", func(extension.StartRequest) (*extension.WaitPlan, error) {
		if refuse {
			return nil, &extension.OperationError{Code: "freeze", Message: "deploys are frozen until Monday"}
		}
		return nil, nil
	}), l.gate("zz", allow)))
	ctx := context.Background()
	w := h.create("b1")
	h.tick()
	got := h.work(w.ID)
	if got.State != storage.WorkFailed || got.Attempts != 0 || got.OutcomeMessage != "deploys are frozen until Monday" || string(got.OutcomeData) != `{"code":"freeze","gate":"policy"}` {
		t.Fatalf("refused work = %+v (data %s)", got, got.OutcomeData)
	}
	if l.names() != "policy" {
		t.Fatalf("after a refusal the next gate was asked: %q", l.names())
	}
	if exes, _ := h.store.ListExecutions(ctx, &storage.ListExecutionsParams{Work: w.ID}); len(exes) != 0 || h.plain.TryNext() != nil {
		t.Fatalf("a refused Work has executions %+v", exes)
	}
	// A retry asks the gates again: the Work still has had no attempt.
	refuse = false
	if _, err := h.ctl.Retry(operator, kernel.ControlRequest{Target: w.ID}); err != nil {
		t.Fatal(err)
	}
	h.tick()
	h.plain.Next(t)
	if l.names() != "policy,policy,zz" || h.work(w.ID).State != storage.WorkRunning {
		t.Fatalf("after the retry: gates asked %q, work %+v", l.names(), h.work(w.ID))
	}
}

func TestStartGateFailsClosed(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	cases := map[string]func(context.Context, extension.StartRequest) (*extension.WaitPlan, error){
		"panic": func(context.Context, extension.StartRequest) (*extension.WaitPlan, error) {
			panic("token s3cret-panic")
		},
		"error": func(context.Context, extension.StartRequest) (*extension.WaitPlan, error) {
			return nil, errors.New("backend said s3cret-error")
		},
		"wrapped context error": func(ctx context.Context, _ extension.StartRequest) (*extension.WaitPlan, error) {
			return nil, &extension.GateRefusal{Gate: "x", Err: context.Canceled}
		},
		// It ignores its context: the deadline alone ends the question.
		"timeout": func(context.Context, extension.StartRequest) (*extension.WaitPlan, error) {
			<-release
			return nil, nil
		},
		"invalid plan": func(context.Context, extension.StartRequest) (*extension.WaitPlan, error) {
			return &extension.WaitPlan{Types: []string{"Not A Type"}}, nil
		},
	}
	for name, gate := range cases {
		t.Run(name, func(t *testing.T) {
			var logs bytes.Buffer
			var mu sync.Mutex
			h := newHarness(t, func(o *scheduler.Options) {
				o.StartGates = func(string, int64) []scheduler.StartGate {
					return []scheduler.StartGate{{Registration: "flaky", Gate: extension.StartGateFunc(gate)}}
				}
				if name == "timeout" {
					// An injected deadline, already as good as past.
					o.StartGateTimeout = time.Nanosecond
				}
				o.Logger = slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &logs}, nil))
			})
			w := h.create("b1")
			h.tick()
			got := h.work(w.ID)
			if got.State != storage.WorkFailed || got.Attempts != 0 || got.WaitReason != "" ||
				got.OutcomeMessage != "start gate flaky failed; retry the Work to ask it again" || string(got.OutcomeData) != `{"code":"gate_failed","gate":"flaky"}` {
				t.Fatalf("work = %+v (data %s)", got, got.OutcomeData)
			}
			if _, err := h.store.GetActiveWait(context.Background(), w.ID); !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("a failed gate left a wait: %v", err)
			}
			if h.plain.TryNext() != nil {
				t.Fatal("an attempt started past a failed gate")
			}
			mu.Lock()
			out := logs.String()
			mu.Unlock()
			if strings.Contains(out, "s3cret") || !strings.Contains(out, "gate=flaky") {
				t.Fatalf("log = %s", out)
			}
		})
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
