package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
)

// maxWaitReason bounds the reason a start gate's parked Work shows.
const maxWaitReason = 256

// askStartGates asks every start gate, in registration-name order, about
// w's first attempt, outside any transaction. It reports true when every
// gate let the attempt start. Otherwise the first gate that did not
// decided: it parked the Work (parkStart) or refused it (refuseStart), or
// the scheduler is closing and the Work is left ready as it was; either
// way the claim does not go on.
func (s *Scheduler) askStartGates(ctx context.Context, w storage.Work, generation int64) (bool, error) {
	if s.o.StartGates == nil {
		return true, nil
	}
	gates := slices.Clone(s.o.StartGates(w.Scope, generation))
	if len(gates) == 0 {
		return true, nil
	}
	slices.SortStableFunc(gates, func(a, b StartGate) int { return strings.Compare(a.Registration, b.Registration) })
	req, mark, err := s.startRequest(ctx, w, generation)
	if err != nil {
		return false, err
	}
	for _, g := range gates {
		if g.Gate == nil {
			continue
		}
		plan, err := s.askStartGate(ctx, g, req)
		if s.stopped(ctx) {
			// A gate cut short by the shutdown decided nothing.
			return false, nil
		}
		if err != nil {
			return false, s.refuseStart(ctx, w, g.Registration, err)
		}
		if plan != nil {
			return false, s.parkStart(ctx, w, g.Registration, plan, mark)
		}
	}
	return true, nil
}

// startRequest is what a start gate is shown of w: its ids, the
// generation, and its queued inputs, oldest first. mark is the acceptance
// sequence of the last event shown (its core.work.created or an input),
// the watermark of a park's wait.
func (s *Scheduler) startRequest(ctx context.Context, w storage.Work, generation int64) (extension.StartRequest, int64, error) {
	req := extension.StartRequest{Scope: w.Scope, Work: w.ID, Binding: w.Binding, Generation: generation, Parent: w.Parent}
	created, err := s.store.GetEvent(ctx, w.CreatedEvent)
	if err != nil {
		return req, 0, err
	}
	mark := created.Seq
	for after := int64(0); after < w.InputCount; {
		ins, err := s.store.ListInputs(ctx, &storage.ListInputsParams{Work: w.ID, AfterPosition: after, UntilPosition: w.InputCount, Limit: storage.MaxLimit})
		if err != nil {
			return req, 0, err
		}
		if len(ins) == 0 {
			break
		}
		for _, in := range ins {
			ev, err := s.store.GetEvent(ctx, in.Event)
			if err != nil {
				return req, 0, err
			}
			mark = max(mark, ev.Seq)
			req.Inputs = append(req.Inputs, extension.StartInput{ID: ev.ID, Type: ev.Type, Source: ev.Source, CorrelationKey: ev.CorrelationKey, Data: ev.Data})
		}
		after = ins[len(ins)-1].Position
	}
	return req, mark, nil
}

// errStartGateTimeout: the gate did not answer within StartGateTimeout.
var errStartGateTimeout = errors.New("scheduler: the start gate did not answer in time")

// startGatePanic is a start gate's panic; its value is never formatted.
type startGatePanic struct{ value any }

func (p *startGatePanic) Error() string { return fmt.Sprintf("panic(%T)", p.value) }

// askStartGate asks one gate, bounded by StartGateTimeout: a panic is an
// error (startGatePanic), and so is a gate that has not answered by the
// deadline (errStartGateTimeout; the gate is handed the deadline in its
// context and must honour it, or its goroutine outlives the question).
func (s *Scheduler) askStartGate(ctx context.Context, g StartGate, req extension.StartRequest) (*extension.WaitPlan, error) {
	ctx, cancel := context.WithTimeout(ctx, s.o.StartGateTimeout)
	defer cancel()
	type answer struct {
		plan *extension.WaitPlan
		err  error
	}
	ch := make(chan answer, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				ch <- answer{err: &startGatePanic{value: p}}
			}
		}()
		plan, err := g.Gate.AllowStart(ctx, req)
		ch <- answer{plan: plan, err: err}
	}()
	select {
	case a := <-ch:
		return a.plan, a.err
	case <-ctx.Done():
		return nil, errStartGateTimeout
	}
}

// refuseStart fails w with a start gate's refusal: an
// *extension.OperationError's code and message, or, for any other error
// (a panic or a timeout among them), gate_failed, logging only the
// error's Go type (its text may hold a credential). The outcome data
// names the code and the gate. A Work that ended meanwhile is left as it
// is.
func (s *Scheduler) refuseStart(ctx context.Context, w storage.Work, gate string, err error) error {
	var oe *extension.OperationError
	if !errors.As(err, &oe) {
		typ := fmt.Sprintf("%T", err)
		var p *startGatePanic
		switch {
		case errors.As(err, &p):
			typ = p.Error()
		case errors.Is(err, errStartGateTimeout):
			typ = "timeout"
		}
		s.o.Logger.Warn("start gate failed without a verdict; the Work fails", "gate", gate, "work", w.ID, "scope", w.Scope, "binding", w.Binding, "error_type", typ)
		oe = &extension.OperationError{Code: toolbelt.ErrGateFailed, Message: "start gate " + gate + " failed; retry the Work to ask it again"}
	}
	data, _ := json.Marshal(map[string]string{"code": oe.Code, "gate": gate})
	ferr := s.store.WithTx(ctx, func(tx storage.Tx) error {
		_, _, err := s.rt.FinishWorkInTx(ctx, tx, w.ID, kernel.Finish{State: storage.WorkFailed, Message: oe.Message, Data: data})
		return err
	})
	if errors.Is(ferr, kernel.ErrWorkState) {
		return nil
	}
	if ferr == nil {
		s.o.Logger.Info("start gate refused the Work", "gate", gate, "work", w.ID, "code", oe.Code)
	}
	return ferr
}

// parkStart parks w on a start gate's plan: the Work waits, showing the
// gate and its reason, on a Wait owned by the gate's registration (the
// plan's types, keys and timeout), registered like a declared wait with
// the watermark of the last event the gate was shown. A Work that moved
// since it was listed is left as it is.
func (s *Scheduler) parkStart(ctx context.Context, w storage.Work, gate string, plan *extension.WaitPlan, mark int64) error {
	reason := "start gate " + gate + ": " + safeReason(plan.Reason)
	var wait storage.Wait
	err := s.store.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		wait, err = s.rt.StartWaitInTx(ctx, tx, kernel.StartWait{
			Work: w.ID, Revision: w.Revision, Watermark: mark, Reason: reason,
			Spec: kernel.WaitSpec{Types: plan.Types, Keys: plan.Keys, Timeout: plan.Timeout, Registration: gate},
		})
		return err
	})
	if errors.Is(err, storage.ErrFenced) {
		return nil
	}
	var ke *kernel.Error
	if errors.As(err, &ke) {
		// The plan is not a valid wait: the gate fails closed.
		s.o.Logger.Warn("start gate answered with a wait plan that is not valid", "gate", gate, "work", w.ID, "code", ke.Code, "reason", ke.Message)
		return s.refuseStart(ctx, w, gate, ke)
	}
	if err == nil {
		s.o.Logger.Info("start gate parked the Work", "gate", gate, "work", w.ID, "wait", wait.ID, "wait_state", wait.State)
	}
	return err
}

// safeReason is a gate's reason as a Work shows it: control characters
// and invalid UTF-8 dropped, at most maxWaitReason bytes, and a default
// when none is left.
func safeReason(r string) string {
	var b strings.Builder
	for _, c := range r {
		if c == utf8.RuneError || unicode.IsControl(c) {
			continue
		}
		if b.Len()+utf8.RuneLen(c) > maxWaitReason {
			break
		}
		b.WriteRune(c)
	}
	if strings.TrimSpace(b.String()) == "" {
		return "it waits for the events its plan names"
	}
	return b.String()
}
