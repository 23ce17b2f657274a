package inproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/open-conduit/open-conduit/extension"
)

// Extension is a first-party extension. Name is its registration name
// (extension.RegistrationName), which owns the namespace <name>.* of its
// operations, toolsets and actions, and names its entry in the
// configuration (extensions.<name>).
type Extension interface {
	Name() string
}

// Operator is an extension that adds operations to the toolbelt.
type Operator interface {
	Operations() []extension.Operation
}

// Toolsetter is an extension that publishes toolsets: named sets of its
// operations (and builtins) for each role, each member with the version
// it joined in. A toolset only gains operations from one release to the
// next.
type Toolsetter interface {
	Toolsets() []extension.Toolset
}

// Actioner is an extension that serves operator actions.
type Actioner interface {
	Actions() []extension.Action
}

// Gater is an extension with a gate, asked before every other
// registration's operation runs in the scopes the active configuration
// enables it for (see extension.Gate). req.Authority.Config is the
// extension's own configuration.
type Gater interface {
	Gate(ctx context.Context, req extension.GateRequest) (*extension.WaitPlan, error)
}

// StartGater is an extension with a start gate, asked by the scheduler
// before a Work's first attempt starts, in the scopes the active
// configuration enables the extension for (see extension.StartGate).
type StartGater interface {
	AllowStart(ctx context.Context, req extension.StartRequest) (*extension.WaitPlan, error)
}

// Playbooker is an extension that ships playbooks: Markdown skills whose
// frontmatter lists the operations they rely on (see extension.Playbook).
// The daemon writes each where agent CLIs read skills.
type Playbooker interface {
	Playbooks() []extension.Playbook
}

// OptIn is an extension enabled only where a configuration entry
// (extensions.<name>) enables it, when OptIn answers true. An extension
// that does not implement it, or answers false, is enabled in every scope
// of a configuration that has no entry for it.
type OptIn interface {
	OptIn() bool
}

// Configurable is an extension with a configuration of its own,
// extensions.<name>.config. CheckConfig is run whenever a configuration is
// validated, on the entry's config ({} when the entry has none); it must
// decode strictly (DecodeConfig) and change nothing. The accepted config
// reaches the extension as extension.Authority.Config. An extension that
// is not Configurable takes no config: an entry with one is refused.
type Configurable interface {
	CheckConfig(config json.RawMessage) error
}

// ConfigInspector is a Configurable extension whose accepted config refers
// to things outside itself (secret names, scope ids) or deserves warnings;
// validation checks the references against the whole configuration and
// shows the warnings (see extension.ConfigReport).
type ConfigInspector interface {
	InspectConfig(config json.RawMessage) extension.ConfigReport
}

// Ingresser is an extension with an ingress: a source of Events from
// outside the daemon, which the daemon runs while the active configuration
// enables the extension (see extension.Ingress).
type Ingresser interface {
	Ingress() extension.Ingress
}

// Registration turns an extension into the registration the host
// registers: its name and whatever it implements of Operator, Toolsetter,
// Actioner, Gater, StartGater, Playbooker, OptIn, Configurable,
// ConfigInspector and Ingresser. The host
// checks it (names, schemas, toolsets, playbooks) when it is registered.
func Registration(ext Extension) extension.Registration {
	reg := extension.Registration{Name: ext.Name()}
	if o, ok := ext.(Operator); ok {
		reg.Operations = o.Operations()
	}
	if t, ok := ext.(Toolsetter); ok {
		reg.Toolsets = t.Toolsets()
	}
	if a, ok := ext.(Actioner); ok {
		reg.Actions = a.Actions()
	}
	if g, ok := ext.(Gater); ok {
		reg.Gate = extension.GateFunc(g.Gate)
	}
	if g, ok := ext.(StartGater); ok {
		reg.StartGate = extension.StartGateFunc(g.AllowStart)
	}
	if p, ok := ext.(Playbooker); ok {
		reg.Playbooks = p.Playbooks()
	}
	if o, ok := ext.(OptIn); ok {
		reg.OptIn = o.OptIn()
	}
	if c, ok := ext.(Configurable); ok {
		reg.CheckConfig = c.CheckConfig
	}
	if c, ok := ext.(ConfigInspector); ok {
		reg.InspectConfig = c.InspectConfig
	}
	if i, ok := ext.(Ingresser); ok {
		reg.Ingress = i.Ingress()
	}
	return reg
}

// The codes of DecodeConfig's problems (configuration diagnostic codes).
const (
	CodeInvalidJSON  = "invalid_json"
	CodeUnknownField = "unknown_field"
	CodeWrongType    = "wrong_type"
	CodeDuplicateKey = "duplicate_key"
	CodeNullValue    = "null_value"
	CodeInvalidValue = "invalid_value"
	CodeMissingField = "missing_field"
)

// DecodeConfig decodes an extension's configuration strictly into v (a
// pointer, usually to a struct with json tags): an empty config is {}; a
// member v has no field for, a duplicate member, a null or a value of the
// wrong type is refused. A refusal is an *extension.ConfigError whose one
// problem is placed at the offending member, relative to the config, so
// validation reports it at /extensions/<name>/config/... . Its remedy
// never quotes the value.
func DecodeConfig(config json.RawMessage, v any) error {
	if len(bytes.TrimSpace(config)) == 0 {
		config = json.RawMessage(`{}`)
	}
	if ptr, ok := firstNull(config); ok {
		return Problem(ptr, CodeNullValue, "null is not a value here: give the member a value, or remove it")
	}
	err := jsonv2.Unmarshal(config, v, jsonv2.RejectUnknownMembers(true))
	if err == nil {
		return nil
	}
	var se *jsonv2.SemanticError
	if errors.As(err, &se) {
		ptr := string(se.JSONPointer)
		if errors.Is(se.Err, jsonv2.ErrUnknownName) {
			return Problem(ptr, CodeUnknownField, "this extension's config has no such member: remove it, or correct its name")
		}
		return Problem(ptr, CodeWrongType, "this member has the wrong type: check it against the extension's documented fields")
	}
	var syn *jsontext.SyntacticError
	if errors.As(err, &syn) {
		if errors.Is(syn.Err, jsontext.ErrDuplicateName) {
			return Problem(string(syn.JSONPointer), CodeDuplicateKey, "a member is given twice: keep one")
		}
		return Problem(string(syn.JSONPointer), CodeInvalidJSON, "the config is not valid JSON")
	}
	return Problem("", CodeInvalidValue, "the config does not decode: check it against the extension's documented fields")
}

// Problem is a configuration refusal of one problem at pointer (relative
// to the config; "" for the config itself). remedy must not quote a
// configured value.
func Problem(pointer, code, remedy string) error {
	return &extension.ConfigError{Problems: []extension.ConfigProblem{{Pointer: pointer, Code: code, Remedy: remedy}}}
}

// firstNull finds the first null in a JSON document and its pointer.
func firstNull(doc json.RawMessage) (string, bool) {
	dec := jsontext.NewDecoder(bytes.NewReader(doc))
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			return "", false
		}
		if tok.Kind() == 'n' {
			return string(dec.StackPointer()), true
		}
	}
}
