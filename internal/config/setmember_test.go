package config

import (
	"errors"
	"strings"
	"testing"
)

func TestSetMember(t *testing.T) {
	doc := []byte(`{"version": 1, "secrets": {"tok": "env:OC_SECRET_REF"},
 "scopes": {"ops": {"bindings": {"agent": {"executor": "shell", "operations": ["emit"]}}, "routes": [{"match": {"type": "a.b"}}]}}}`)
	for _, c := range []struct {
		name, ptr, value, want string
	}{
		{"replace a list", "/scopes/ops/bindings/agent/operations", `["emit", "@github.author"]`,
			`"operations": [` + "\n" + `            "emit",` + "\n" + `            "@github.author"` + "\n" + `          ]`},
		{"add a member", "/scopes/ops/bindings/agent/playbook", `"triage"`, `"playbook": "triage"`},
		{"an element", "/scopes/ops/routes/0/match/type", `"c.*"`, `"type": "c.*"`},
		{"an escaped name", "/scopes/ops/bindings/a~1b", `{"executor": "shell"}`, `"a/b": {`},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := SetMember(doc, c.ptr, []byte(c.value))
			if err != nil {
				t.Fatal(err)
			}
			s := string(out)
			if !strings.Contains(s, c.want) || !strings.HasSuffix(s, "}\n") {
				t.Fatalf("%s lacks %q", s, c.want)
			}
			// Every other member keeps its place and its text: the
			// secret reference is still the first of the document.
			if !strings.Contains(s, `"env:OC_SECRET_REF"`) || strings.Index(s, `"version"`) > strings.Index(s, `"secrets"`) ||
				strings.Index(s, `"secrets"`) > strings.Index(s, `"scopes"`) {
				t.Fatalf("the other members moved or changed: %s", s)
			}
		})
	}
	for _, c := range []struct {
		name, ptr, value, want, pointer string
	}{
		{"the whole document", "", `{}`, "config apply", ""},
		{"no slash", "scopes", `1`, "starts with '/'", ""},
		{"a bad escape", "/scopes/a~2", `1`, "~0", ""},
		{"not JSON", "/version", `[emit`, "not one JSON value", ""},
		{"two values", "/version", `1 2`, "not one JSON value", ""},
		{"a missing parent", "/scopes/ops/bindings/nobody/operations", `[]`, "/scopes/ops/bindings/nobody does not exist", "/scopes/ops/bindings"},
		{"under a scalar", "/scopes/ops/bindings/agent/executor/x", `1`, "neither an object nor a list", "/scopes/ops/bindings/agent/executor"},
		{"an index out of range", "/scopes/ops/routes/1", `{}`, "elements 0 to 0 only", "/scopes/ops/routes"},
		{"a name for an index", "/scopes/ops/routes/-", `{}`, "names none of them", "/scopes/ops/routes"},
		{"a secret's name stays unsaid", "/secrets/OC_NOT_A_NAME/x", `1`, "/secrets (a member under it) does not exist", "/secrets"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := SetMember(doc, c.ptr, []byte(c.value))
			var pe *PointerError
			if !errors.As(err, &pe) || !strings.Contains(pe.Message, c.want) || pe.Pointer != c.pointer {
				t.Fatalf("SetMember = %v (%+v), want a refusal saying %q at %q", err, pe, c.want, c.pointer)
			}
			if strings.Contains(err.Error(), "OC_SECRET_REF") || (len(c.value) > 2 && strings.Contains(err.Error(), c.value)) {
				t.Fatalf("the refusal echoes a value: %v", err)
			}
		})
	}
}
