package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/extension"
)

// extRegistry registers an extension "human" whose config check refuses
// anything but {"approve": [strings]}, placing each problem inside the
// config, and an extension "plain" with no config.
func extRegistry(t *testing.T) *Registry {
	t.Helper()
	reg := testRegistry(t)
	must(t, reg.AddExtension("human", []string{"human.ask"}, nil))
	must(t, reg.AddExtension("plain", []string{"plain.op"}, nil))
	must(t, reg.SetExtensionConfig("human", func(raw json.RawMessage) error {
		var c map[string]json.RawMessage
		if err := json.Unmarshal(raw, &c); err != nil {
			return errors.New("secret-ish text ghs_x")
		}
		var problems []extension.ConfigProblem
		for k := range c {
			if k != "approve" {
				problems = append(problems, extension.ConfigProblem{Pointer: "/" + k, Code: "unknown_field", Remedy: "remove it"})
			}
		}
		if v, ok := c["approve"]; ok {
			var ops []string
			if json.Unmarshal(v, &ops) != nil {
				problems = append(problems, extension.ConfigProblem{Pointer: "/approve", Code: "wrong_type", Remedy: "a list of operations"})
			}
		}
		if problems != nil {
			return &extension.ConfigError{Problems: problems}
		}
		return nil
	}))
	return reg
}

func TestExtensionConfigIsCheckedByItsExtension(t *testing.T) {
	base := `{"version": 1, "extensions": %s, "scopes": {"a": {}}}`
	for _, tt := range []struct {
		name, exts string
		want       []Diagnostic
	}{
		{"a valid config", `{"human": {"config": {"approve": ["plain.op"]}}}`, nil},
		{"no config is {}", `{"human": {"enabled": false}}`, nil},
		{"an unknown member inside it", `{"human": {"config": {"approve": [], "colour": "red"}}}`,
			[]Diagnostic{{Pointer: "/extensions/human/config/colour", Code: CodeUnknownField, Remedy: "remove it"}}},
		{"a wrong type inside it", `{"human": {"config": {"approve": "all"}}}`,
			[]Diagnostic{{Pointer: "/extensions/human/config/approve", Code: CodeWrongType, Remedy: "a list of operations"}}},
		{"a config that is not an object", `{"human": {"config": [1]}}`, []Diagnostic{{Pointer: "/extensions/human/config", Code: CodeWrongType}}},
		{"an extension that takes none", `{"plain": {"config": {}}}`, []Diagnostic{{Pointer: "/extensions/plain/config", Code: CodeUnknownField}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			snap, res := Validate([]byte(fmt.Sprintf(base, tt.exts)), extRegistry(t))
			got := slices.Clone(res.Diagnostics)
			if len(got) != len(tt.want) {
				t.Fatalf("diagnostics %v, want %v", got, tt.want)
			}
			for i, w := range tt.want {
				if got[i].Pointer != w.Pointer || got[i].Code != w.Code || (w.Remedy != "" && got[i].Remedy != w.Remedy) {
					t.Fatalf("diagnostic %v, want %v", got[i], w)
				}
			}
			if tt.want == nil && snap == nil {
				t.Fatal("no snapshot for a valid configuration")
			}
		})
	}
}

// An error that is not a *ConfigError becomes one problem at the config,
// its text never shown.
func TestExtensionConfigOtherErrorIsNotShown(t *testing.T) {
	reg := NewRegistry()
	must(t, reg.AddExtension("human", nil, nil))
	must(t, reg.SetExtensionConfig("human", func(json.RawMessage) error { return errors.New("ghs_secret") }))
	_, res := Validate([]byte(`{"version": 1, "extensions": {"human": {"config": {"k": "v"}}}}`), reg)
	if len(res.Diagnostics) != 1 || res.Diagnostics[0].Pointer != "/extensions/human/config" || res.Diagnostics[0].Code != CodeInvalidValue {
		t.Fatalf("diagnostics %v", res.Diagnostics)
	}
	if b, _ := json.Marshal(res.Diagnostics); strings.Contains(string(b), "ghs_secret") {
		t.Fatal("the extension's error text is shown")
	}
}

func TestSnapshotExtensionHoldsItsConfig(t *testing.T) {
	snap, res := Validate([]byte(`{"version": 1, "extensions": {"human": {"scopes": ["a"], "config": { "approve" : ["plain.op"] }}}, "scopes": {"a": {}}}`), extRegistry(t))
	if snap == nil {
		t.Fatalf("invalid: %v", res.Diagnostics)
	}
	e, ok := snap.Extension("human")
	if !ok || !e.Enabled || !slices.Equal(e.Scopes, []string{"a"}) || string(e.Config) != `{"approve":["plain.op"]}` {
		t.Fatalf("entry = %+v (%v) config %s", e, ok, e.Config)
	}
	if _, ok := snap.Extension("plain"); ok {
		t.Fatal("an extension without an entry has one")
	}
	if err := extRegistry(t).SetExtensionConfig("nobody", func(json.RawMessage) error { return nil }); !errors.Is(err, extension.ErrNotFound) {
		t.Fatalf("a check for an unregistered extension: %v", err)
	}
}

// What an accepted extension config refers to is checked against the
// configuration: a secret name no secret has and a scope id no live scope
// has are unknown_reference at their place; its warnings are the result's.
func TestExtensionConfigReferencesAndWarnings(t *testing.T) {
	reg := extRegistry(t)
	must(t, reg.SetExtensionInspect("human", func(raw json.RawMessage) extension.ConfigReport {
		var c struct {
			Approve []string `json:"approve"`
		}
		_ = json.Unmarshal(raw, &c)
		rep := extension.ConfigReport{}
		for i, name := range c.Approve {
			ptr := fmt.Sprintf("/approve/%d", i)
			switch {
			case strings.HasPrefix(name, "secret:"):
				rep.Secrets = append(rep.Secrets, extension.ConfigReference{Pointer: ptr, Name: strings.TrimPrefix(name, "secret:")})
			case strings.HasPrefix(name, "scope:"):
				rep.Scopes = append(rep.Scopes, extension.ConfigReference{Pointer: ptr, Name: strings.TrimPrefix(name, "scope:")})
			default:
				rep.Warnings = append(rep.Warnings, extension.ConfigProblem{Pointer: ptr, Code: "odd_entry", Remedy: "this entry is odd"})
			}
		}
		return rep
	}))
	doc := `{"version": 1, "secrets": {"hook": "env:HOOK"}, "extensions": {"human": {"config": {"approve": %s}}},
		"scopes": {"a": {}, "gone": {"removed": true}}}`
	snap, res := Validate([]byte(fmt.Sprintf(doc, `["secret:hook", "scope:a", "plain"]`)), reg)
	if snap == nil {
		t.Fatalf("refused: %v", res.Diagnostics)
	}
	i := slices.IndexFunc(res.Warnings, func(w Warning) bool { return w.Code == "odd_entry" })
	if i < 0 || res.Warnings[i].Pointer != "/extensions/human/config/approve/2" || res.Warnings[i].Message != "this entry is odd" {
		t.Fatalf("warnings %v", res.Warnings)
	}
	_, res = Validate([]byte(fmt.Sprintf(doc, `["secret:nope", "scope:b", "scope:gone"]`)), reg)
	var got []string
	for _, d := range res.Diagnostics {
		got = append(got, d.Pointer+" "+string(d.Code))
	}
	want := []string{
		"/extensions/human/config/approve/0 unknown_reference",
		"/extensions/human/config/approve/1 unknown_reference",
		"/extensions/human/config/approve/2 unknown_reference",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("diagnostics %q, want %q", got, want)
	}
	for _, d := range res.Diagnostics {
		if strings.Contains(d.Remedy, "nope") || strings.Contains(d.Remedy, "gone") {
			t.Fatalf("%v quotes the config", d)
		}
	}
}
