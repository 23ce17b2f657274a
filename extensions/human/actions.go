package human

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/extension/inproc"
)

// Actions are the operators' actions on approvals.
func (x *Extension) Actions() []extension.Action {
	return []extension.Action{
		{
			Name: ActionList, Summary: "List the approvals of a scope, oldest first.",
			InputSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{"state":{"enum":["pending","approved","denied","expired"]},"work":{"type":"string"},"limit":{"type":"integer","minimum":1,"maximum":500}}}`),
			Handler:     x.list,
		},
		{
			Name: ActionApprove, Summary: "Approve a pending approval: the held call passes once, or the held Work starts.",
			InputSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["approval"],"properties":{"approval":{"type":"string"},"note":{"type":"string"}}}`),
			Handler:     x.decider(StateApproved),
		},
		{
			Name: ActionDeny, Summary: "Deny a pending approval with a reason: the held call fails with approval_denied.",
			InputSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["approval","reason"],"properties":{"approval":{"type":"string"},"reason":{"type":"string"}}}`),
			Handler:     x.decider(StateDenied),
		},
	}
}

func invalid(format string, args ...any) error {
	return &extension.OperationError{Code: CodeInvalid, Message: fmt.Sprintf(format, args...)}
}

// view is an approval as an operator sees it: its state as of now.
func (x *Extension) view(a Approval) Approval {
	a.State = effective(a, x.o.Now())
	return a
}

func (x *Extension) list(ctx context.Context, req extension.ActionRequest) (json.RawMessage, error) {
	if x.o.Port == nil {
		return nil, errors.New("human: no port")
	}
	var in struct {
		State string `json:"state"`
		Work  string `json:"work"`
		Limit int    `json:"limit"`
	}
	if err := inproc.DecodeConfig(req.Input, &in); err != nil {
		return nil, invalid("the input takes state, work and limit only")
	}
	if in.Limit <= 0 || in.Limit > 500 {
		in.Limit = 500
	}
	q := ListQuery{Scope: req.Scope, Work: in.Work, State: in.State, Limit: in.Limit}
	if in.State == StateExpired || in.State == StatePending {
		q.State = "" // a pending approval past its expiry is shown expired
	}
	rows, err := x.o.Port.List(ctx, q)
	if err != nil {
		return nil, err
	}
	out := []Approval{}
	for _, a := range rows {
		a = x.view(a)
		if in.State == "" || a.State == in.State {
			out = append(out, a)
		}
	}
	return json.Marshal(map[string]any{"approvals": out})
}

// decider decides an approval: approved (with an optional note) or
// denied (with a reason). Deciding it the same way again answers it as
// it is (a retry); deciding it the other way is approval_decided.
func (x *Extension) decider(state string) extension.ActionHandler {
	return func(ctx context.Context, req extension.ActionRequest) (json.RawMessage, error) {
		if x.o.Port == nil {
			return nil, errors.New("human: no port")
		}
		var in struct {
			Approval string `json:"approval"`
			Note     string `json:"note"`
			Reason   string `json:"reason"`
		}
		if err := inproc.DecodeConfig(req.Input, &in); err != nil || in.Approval == "" {
			return nil, invalid("the input names the approval (and a note, or for a denial a reason)")
		}
		note := in.Note
		if state == StateDenied {
			note = in.Reason
			if strings.TrimSpace(note) == "" {
				return nil, invalid("a denial needs a reason: it is what the held call fails with")
			}
		}
		if len(note) > MaxNote || !utf8.ValidString(note) {
			return nil, invalid("a note or a reason is at most %d bytes of UTF-8", MaxNote)
		}
		a, err := x.o.Port.Get(ctx, in.Approval)
		if errors.Is(err, extension.ErrNotFound) || err == nil && a.Scope != req.Scope {
			return nil, &extension.OperationError{Code: CodeNotFound, Message: fmt.Sprintf("no approval %s in scope %s; open-conduit approvals list shows them", clip(in.Approval), req.Scope)}
		}
		if err != nil {
			return nil, err
		}
		now := x.o.Now()
		switch effective(a, now) {
		case state:
			return json.Marshal(map[string]any{"approval": a})
		case StateExpired:
			if a.State == StatePending {
				if _, err := x.o.Port.Decide(ctx, Decision{ID: a.ID, State: StateExpired, Actor: "host:timeout", At: now}); err != nil && !errors.Is(err, extension.ErrConflict) {
					return nil, err
				}
			}
			return nil, &extension.OperationError{Code: CodeExpired, Message: fmt.Sprintf("approval %s expired without a decision; it can no longer be decided", a.ID)}
		case StatePending:
		default:
			return nil, &extension.OperationError{Code: CodeDecided, Message: fmt.Sprintf("approval %s was already %s by %s", a.ID, a.State, a.Actor)}
		}
		a, err = x.o.Port.Decide(ctx, Decision{ID: a.ID, State: state, Actor: req.Caller, Note: note, At: now, Wake: true, Cause: req.Event})
		if errors.Is(err, extension.ErrConflict) {
			// Decided meanwhile: answer what it is now.
			if a, err = x.o.Port.Get(ctx, in.Approval); err == nil && a.State != state {
				return nil, &extension.OperationError{Code: CodeDecided, Message: fmt.Sprintf("approval %s was already %s by %s", a.ID, a.State, a.Actor)}
			}
		}
		if err != nil {
			return nil, err
		}
		return json.Marshal(map[string]any{"approval": a})
	}
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
