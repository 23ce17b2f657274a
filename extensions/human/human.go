package human

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/extension/inproc"
)

// Name is the registration name: it owns human.*.
const Name = "human"

// EventDecided is the Event a decision emits, correlated to the
// approval's Work: it wakes the Work a call or a start parked.
const EventDecided = "human.approval.decided"

// The operator actions.
const (
	ActionList    = "human.list"
	ActionApprove = "human.approve"
	ActionDeny    = "human.deny"
)

// Codes of its refusals (422).
const (
	CodeDenied   = "approval_denied"
	CodeExpired  = "approval_expired"
	CodeNotFound = "approval_not_found"
	CodeDecided  = "approval_decided"
	CodeInvalid  = "invalid_input"
)

// DefaultTimeout is how long an approval waits for a decision when the
// configuration names no timeout.
const DefaultTimeout = 24 * time.Hour

// MaxNote bounds an approver's note or a denial's reason.
const MaxNote = 1024

// Config is the extension's configuration (extensions.human.config).
type Config struct {
	// Operations need an approval for every call: an operations list
	// (names, toolsets @x, denials !x), resolved like a binding's.
	Operations []string `json:"operations,omitempty"`
	// Bindings need an approval before a Work's first attempt.
	Bindings []string `json:"bindings,omitempty"`
	// Timeout is how long an approval waits (a Go duration such as "1h";
	// default DefaultTimeout, at most 30 days).
	Timeout string `json:"timeout,omitempty"`
}

// Options are what the extension is built on.
type Options struct {
	// Port keeps the approvals (nil: registered for its names only, as an
	// offline configuration check needs; a call then fails closed).
	Port Port
	// Resolve resolves an operations list against the registered
	// operations and toolsets; a *extension.ConfigError places its
	// problems inside the list. nil: names are taken as they are.
	Resolve func(list []string) ([]string, error)
	// ConfigAt is the extension's configuration in a committed generation
	// (the start gate's, which is not handed one).
	ConfigAt func(ctx context.Context, generation int64) (json.RawMessage, error)
	// Now is the clock (required with a Port).
	Now func() time.Time
}

// Extension is the human extension.
type Extension struct{ o Options }

// New returns the extension.
func New(o Options) *Extension { return &Extension{o: o} }

// Registration is the extension's registration: inproc's, with its start
// gate.
func Registration(o Options) extension.Registration {
	x := New(o)
	reg := inproc.Registration(x)
	reg.StartGate = extension.StartGateFunc(x.AllowStart)
	return reg
}

// Name is the registration name.
func (*Extension) Name() string { return Name }

// OptIn: a configuration without a human entry does not enable it, so no
// gate, start gate or action of it is there until an operator asks for
// approvals.
func (*Extension) OptIn() bool { return true }

var (
	_ inproc.Gater        = (*Extension)(nil)
	_ inproc.Actioner     = (*Extension)(nil)
	_ inproc.Configurable = (*Extension)(nil)
)

const maxTimeout = 30 * 24 * time.Hour

// decode checks a configuration and returns it with its timeout and its
// resolved operations.
func (x *Extension) decode(raw json.RawMessage) (Config, time.Duration, []string, error) {
	var c Config
	if err := inproc.DecodeConfig(raw, &c); err != nil {
		return c, 0, nil, err
	}
	timeout := DefaultTimeout
	if c.Timeout != "" {
		d, err := time.ParseDuration(c.Timeout)
		if err != nil || d <= 0 || d > maxTimeout {
			return c, 0, nil, inproc.Problem("/timeout", inproc.CodeInvalidValue, "give a duration such as 30m or 24h, more than 0 and at most 720h")
		}
		timeout = d
	}
	for i, b := range c.Bindings {
		if b == "" {
			return c, 0, nil, inproc.Problem(fmt.Sprintf("/bindings/%d", i), inproc.CodeInvalidValue, "name a binding")
		}
	}
	ops := c.Operations
	if x.o.Resolve != nil && len(ops) > 0 {
		var err error
		if ops, err = x.o.Resolve(c.Operations); err != nil {
			var ce *extension.ConfigError
			if errors.As(err, &ce) {
				out := &extension.ConfigError{}
				for _, p := range ce.Problems {
					out.Problems = append(out.Problems, extension.ConfigProblem{Pointer: "/operations" + p.Pointer, Code: p.Code, Remedy: p.Remedy})
				}
				return c, 0, nil, out
			}
			return c, 0, nil, inproc.Problem("/operations", inproc.CodeInvalidValue, "the operations list does not resolve: name registered operations and toolsets")
		}
	}
	return c, timeout, ops, nil
}

// CheckConfig checks extensions.human.config strictly.
func (x *Extension) CheckConfig(raw json.RawMessage) error {
	_, _, _, err := x.decode(raw)
	return err
}

// InputHash is the hex SHA-256 of input's canonical form (RFC 8785).
func InputHash(input json.RawMessage) (string, error) {
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage(`{}`)
	}
	v := jsontext.Value(bytes.Clone(input))
	if err := v.Canonicalize(); err != nil {
		return "", err
	}
	sum := sha256.Sum256(v)
	return hex.EncodeToString(sum[:]), nil
}

// Gate parks a call to a listed operation until an operator approves it.
func (x *Extension) Gate(ctx context.Context, req extension.GateRequest) (*extension.WaitPlan, error) {
	_, timeout, ops, err := x.decode(req.Authority.Config)
	if err != nil {
		return nil, err // no verdict: gate_failed
	}
	if !slices.Contains(ops, req.Operation) {
		return nil, nil
	}
	hash, err := InputHash(req.Input)
	if err != nil {
		return nil, err
	}
	a := req.Authority
	return x.hold(ctx, Approval{Scope: a.Scope, Work: a.Work, Binding: a.Binding, Kind: KindCall, Operation: req.Operation, InputHash: hash}, timeout)
}

// AllowStart holds a listed binding's Work before its first attempt.
func (x *Extension) AllowStart(ctx context.Context, req extension.StartRequest) (*extension.WaitPlan, error) {
	if x.o.ConfigAt == nil {
		return nil, errors.New("human: no configuration to read")
	}
	raw, err := x.o.ConfigAt(ctx, req.Generation)
	if err != nil {
		return nil, err
	}
	c, timeout, _, err := x.decode(raw)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(c.Bindings, req.Binding) {
		return nil, nil
	}
	return x.hold(ctx, Approval{Scope: req.Scope, Work: req.Work, Binding: req.Binding, Kind: KindStart}, timeout)
}

// hold decides a held call or start: an approved approval is consumed and
// lets it through once; a denied one refuses it; a pending one parks it
// again; one that expired is consumed and refuses it once, saying so; and
// without an open approval a new one is created and parks it.
func (x *Extension) hold(ctx context.Context, want Approval, timeout time.Duration) (*extension.WaitPlan, error) {
	if x.o.Port == nil || x.o.Now == nil {
		return nil, errors.New("human: no port")
	}
	key := Key{Work: want.Work, Kind: want.Kind, Operation: want.Operation, InputHash: want.InputHash}
	now := x.o.Now()
	a, err := x.o.Port.Open(ctx, key)
	switch {
	case errors.Is(err, extension.ErrNotFound):
		want.State, want.CreatedAt, want.ExpiresAt = StatePending, now, now.Add(timeout)
		if a, err = x.o.Port.Create(ctx, want); err != nil {
			return nil, err
		}
		return x.plan(a, now), nil
	case err != nil:
		return nil, err
	}
	switch effective(a, now) {
	case StateApproved:
		if _, err := x.o.Port.Consume(ctx, a.ID, now); err != nil {
			return nil, err
		}
		return nil, nil
	case StateDenied:
		msg := fmt.Sprintf("approval %s of %s was denied by %s", a.ID, what(a), a.Actor)
		if a.Note != "" {
			msg += ": " + a.Note
		}
		return nil, &extension.OperationError{Code: CodeDenied, Message: msg}
	case StateExpired:
		if a.State == StatePending {
			if _, err := x.o.Port.Decide(ctx, Decision{ID: a.ID, State: StateExpired, Actor: "host:timeout", At: now}); err != nil && !errors.Is(err, extension.ErrConflict) {
				return nil, err
			}
		}
		if _, err := x.o.Port.Consume(ctx, a.ID, now); err != nil && !errors.Is(err, extension.ErrConflict) {
			return nil, err
		}
		return nil, &extension.OperationError{Code: CodeExpired, Message: fmt.Sprintf("approval %s of %s expired without a decision; asking again makes a new approval", a.ID, what(a))}
	}
	return x.plan(a, now), nil
}

func what(a Approval) string {
	if a.Kind == KindStart {
		return "the start of Work " + a.Work
	}
	return a.Operation
}

// effective is an approval's state as of now: a pending approval past its
// expiry has expired.
func effective(a Approval, now time.Time) string {
	if a.State == StatePending && !a.ExpiresAt.IsZero() && !now.Before(a.ExpiresAt) {
		return StateExpired
	}
	return a.State
}

// plan parks the caller until the approval is decided, or until it
// expires.
func (x *Extension) plan(a Approval, now time.Time) *extension.WaitPlan {
	left := a.ExpiresAt.Sub(now)
	if left < time.Second {
		left = time.Second
	}
	out, _ := json.Marshal(map[string]any{
		"approval": a.ID, "state": StatePending, "expires_at": a.ExpiresAt,
		"message": fmt.Sprintf("%s needs an operator's approval (approval %s); the Work resumes when it is decided: call again with the same input then", what(a), a.ID),
	})
	return &extension.WaitPlan{
		Types: []string{EventDecided}, Keys: []string{a.Work}, Timeout: left, Output: out,
		Reason: fmt.Sprintf("approval %s of %s awaits an operator (open-conduit approvals approve %s)", a.ID, what(a), a.ID),
	}
}
