package inproc_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/extension/inproc"
)

// greeter is a small extension: one operation, one toolset, a gate and a
// configuration of its own.
type greeter struct{}

type greeterConfig struct {
	Greeting string   `json:"greeting"`
	Hold     []string `json:"hold"`
}

func (greeter) Name() string { return "greeter" }

func (greeter) Operations() []extension.Operation {
	return []extension.Operation{{Name: "greeter.hello", Summary: "Say hello.", Handler: func(_ context.Context, auth extension.Authority, _ json.RawMessage) (json.RawMessage, error) {
		var c greeterConfig
		if err := inproc.DecodeConfig(auth.Config, &c); err != nil {
			return nil, err
		}
		return json.Marshal(map[string]string{"said": c.Greeting})
	}}}
}

func (greeter) Toolsets() []extension.Toolset {
	return []extension.Toolset{{Name: "greeter.guest", Operations: []extension.ToolsetOperation{{Name: "greeter.hello", Since: "v1"}}}}
}

func (greeter) Gate(_ context.Context, req extension.GateRequest) (*extension.WaitPlan, error) {
	return nil, &extension.OperationError{Code: "held", Message: req.Operation}
}

func (greeter) CheckConfig(raw json.RawMessage) error {
	var c greeterConfig
	return inproc.DecodeConfig(raw, &c)
}

func TestRegistrationHasEveryPart(t *testing.T) {
	reg := inproc.Registration(greeter{})
	if reg.Name != "greeter" || len(reg.Operations) != 1 || len(reg.Toolsets) != 1 || reg.Gate == nil || reg.CheckConfig == nil || len(reg.Actions) != 0 {
		t.Fatalf("registration = %+v", reg)
	}
	if err := extension.CheckToolset(reg.Name, reg.Toolsets[0]); err != nil {
		t.Fatal(err)
	}
	_, err := reg.Gate.Check(context.Background(), extension.GateRequest{Operation: "other.op"})
	var oe *extension.OperationError
	if !errors.As(err, &oe) || oe.Code != "held" {
		t.Fatalf("gate answered %v", err)
	}
	out, err := reg.Operations[0].Handler(context.Background(), extension.Authority{Config: json.RawMessage(`{"greeting":"hi"}`)}, nil)
	if err != nil || string(out) != `{"said":"hi"}` {
		t.Fatalf("handler = %s, %v", out, err)
	}
}

type bare struct{}

func (bare) Name() string { return "bare" }

func TestRegistrationOfABareExtension(t *testing.T) {
	reg := inproc.Registration(bare{})
	if reg.Name != "bare" || reg.Operations != nil || reg.Gate != nil || reg.CheckConfig != nil || reg.StartGate != nil || reg.Playbooks != nil || reg.OptIn {
		t.Fatalf("registration = %+v", reg)
	}
}

// starter holds every Work's first attempt, ships one playbook, and is
// opt-in.
type starter struct{ optIn bool }

const starterPlaybook = "---\noperations: [starter.look]\n---\n# Look first\n"

func (starter) Name() string { return "starter" }

func (starter) AllowStart(_ context.Context, req extension.StartRequest) (*extension.WaitPlan, error) {
	return &extension.WaitPlan{Types: []string{"starter.go"}, Keys: []string{req.Work}, Reason: "held"}, nil
}

func (starter) Playbooks() []extension.Playbook {
	return []extension.Playbook{{Name: "starter-look", Markdown: starterPlaybook}}
}

func (s starter) OptIn() bool { return s.optIn }

func TestRegistrationHasStartGatePlaybooksAndOptIn(t *testing.T) {
	reg := inproc.Registration(starter{optIn: true})
	if reg.Name != "starter" || reg.StartGate == nil || len(reg.Playbooks) != 1 || !reg.OptIn || reg.Gate != nil {
		t.Fatalf("registration = %+v", reg)
	}
	plan, err := reg.StartGate.AllowStart(context.Background(), extension.StartRequest{Work: "w1"})
	if err != nil || plan == nil || plan.Reason != "held" || len(plan.Keys) != 1 || plan.Keys[0] != "w1" {
		t.Fatalf("start gate = %+v, %v", plan, err)
	}
	if err := extension.CheckPlaybook(reg.Playbooks[0]); err != nil {
		t.Fatal(err)
	}
	if ops, err := extension.PlaybookOperations(reg.Playbooks[0].Markdown); err != nil || len(ops) != 1 || ops[0] != "starter.look" {
		t.Fatalf("playbook operations = %v, %v", ops, err)
	}
	// Answering false keeps the default: enabled without an entry.
	if inproc.Registration(starter{}).OptIn {
		t.Fatal("an extension whose OptIn answers false is opt-in")
	}
}

func TestDecodeConfigIsStrict(t *testing.T) {
	for _, tt := range []struct {
		name, config, pointer, code string
	}{
		{"empty is {}", ``, "", ""},
		{"known members", `{"greeting":"hi","hold":["a"]}`, "", ""},
		{"unknown member", `{"greeting":"hi","colour":"red"}`, "/colour", inproc.CodeUnknownField},
		{"wrong type", `{"hold":[1]}`, "/hold/0", inproc.CodeWrongType},
		{"null", `{"greeting":null}`, "/greeting", inproc.CodeNullValue},
		{"duplicate", `{"greeting":"a","greeting":"b"}`, "/greeting", inproc.CodeDuplicateKey},
		{"not an object", `[1]`, "", inproc.CodeWrongType},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := greeter{}.CheckConfig(json.RawMessage(tt.config))
			if tt.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ce *extension.ConfigError
			if !errors.As(err, &ce) || len(ce.Problems) != 1 {
				t.Fatalf("err = %v, want one problem", err)
			}
			p := ce.Problems[0]
			if p.Pointer != tt.pointer || p.Code != tt.code || p.Remedy == "" {
				t.Fatalf("problem = %+v, want %s at %q", p, tt.code, tt.pointer)
			}
		})
	}
}
