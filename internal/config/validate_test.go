package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/executor"
)

// want is an expected diagnostic: pointer and code.
type want struct {
	ptr  string
	code Code
}

func (w want) String() string { return w.ptr + " " + string(w.code) }

func got(ds []Diagnostic) []want {
	out := []want{}
	for _, d := range ds {
		out = append(out, want{d.Pointer, d.Code})
	}
	return out
}

const (
	agent = "/scopes/ops/bindings/agent"
	route = "/scopes/ops/routes"
)

// TestValidateBase proves the base of every mutation is valid, so that each
// case's diagnostics come from its mutation alone.
func TestValidateBase(t *testing.T) {
	snap, res := Validate([]byte(baseConfig), testRegistry(t))
	if !res.Valid() || snap == nil {
		t.Fatalf("base config is invalid: %v", res.Diagnostics)
	}
}

// mutation changes one thing in a decoded configuration.
type mutation func(t testing.TB, d jdoc)

// ruleCase breaks one rule of the valid base.
type ruleCase struct {
	name string
	mut  mutation
	want []want
}

// ruleCases are the table of TestValidateRules, and seeds of FuzzParse.
func ruleCases() []ruleCase {
	setTo := func(ptr string, v any) mutation { return func(t testing.TB, d jdoc) { set(t, d, ptr, v) } }
	delAt := func(ptr string) mutation { return func(t testing.TB, d jdoc) { del(t, d, ptr) } }
	return []ruleCase{
		// version
		{"version missing", delAt("/version"), one("/version", CodeMissingField)},
		{"version a string", setTo("/version", "1"), one("/version", CodeWrongType)},
		{"version a fraction", setTo("/version", raw("1.0")), one("/version", CodeWrongType)},
		{"version 2", setTo("/version", 2), one("/version", CodeUnsupportedVersion)},
		{"version 2 hides the rest", func(t testing.TB, d jdoc) {
			set(t, d, "/version", 2)
			set(t, d, "/colour", "blue")
		}, one("/version", CodeUnsupportedVersion)},
		// top level
		{"unknown top-level field", setTo("/colour", "blue"), one("/colour", CodeUnknownField)},
		{"unknown field with an unsafe name", setTo("/Colour Of It", "blue"), one("", CodeUnknownField)},
		// limits
		{"limits null", setTo("/limits", raw("null")), one("/limits", CodeNullValue)},
		{"limits not an object", setTo("/limits", 5), one("/limits", CodeWrongType)},
		{"max_running a string", setTo("/limits/max_running", "4"), one("/limits/max_running", CodeWrongType)},
		{"max_running zero", setTo("/limits/max_running", 0), one("/limits/max_running", CodeInvalidValue)},
		{"max_running a fraction", setTo("/limits/max_running", raw("1.5")), one("/limits/max_running", CodeWrongType)},
		{"max_running with an exponent", setTo("/limits/max_running", raw("4e0")), one("/limits/max_running", CodeWrongType)},
		{"causal_max_depth beyond int64", setTo("/limits/causal_max_depth", raw("99999999999999999999")), one("/limits/causal_max_depth", CodeInvalidValue)},
		{"causal_per_minute negative", setTo("/limits/causal_per_minute", -1), one("/limits/causal_per_minute", CodeInvalidValue)},
		{"lease not a duration", setTo("/limits/lease", "soon"), one("/limits/lease", CodeInvalidValue)},
		{"lease zero", setTo("/limits/lease", "0s"), one("/limits/lease", CodeInvalidValue)},
		{"lease within the renewal margin", setTo("/limits/lease", "14s"), one("/limits/lease", CodeInvalidValue)},
		{"lease a number", setTo("/limits/lease", 30), one("/limits/lease", CodeWrongType)},
		{"attempt_timeout too long", setTo("/limits/attempt_timeout", "1000h"), one("/limits/attempt_timeout", CodeInvalidValue)},
		{"unknown limit", setTo("/limits/retries", 3), one("/limits/retries", CodeUnknownField)},
		// secrets
		{"secrets not an object", setTo("/secrets", raw(`["env:X"]`)), one("/secrets", CodeWrongType)},
		{"secret name malformed", setTo("/secrets/GH", "env:GH"), one("/secrets", CodeInvalidValue)},
		{"secret scheme unknown", setTo("/secrets/gh", "vault:ci/token"), one("/secrets/gh", CodeInvalidSecretReference)},
		{"secret without a scheme", setTo("/secrets/gh", "GH_TOKEN"), one("/secrets/gh", CodeInvalidSecretReference)},
		{"env reference malformed", setTo("/secrets/gh", "env:1GH"), one("/secrets/gh", CodeInvalidSecretReference)},
		{"keyring reference without user", setTo("/secrets/slack", "keyring:open-conduit"), one("/secrets/slack", CodeInvalidSecretReference)},
		{"keyring reference with empty service", setTo("/secrets/slack", "keyring:/slack"), one("/secrets/slack", CodeInvalidSecretReference)},
		{"file reference escaping", setTo("/secrets/db", "file:../db"), one("/secrets/db", CodeInvalidSecretReference)},
		{"cmd reference blank", setTo("/secrets/vault", "cmd:   "), one("/secrets/vault", CodeInvalidSecretReference)},
		{"cmd reference with a control character", setTo("/secrets/vault", "cmd:pass\x01show"), one("/secrets/vault", CodeInvalidSecretReference)},
		{"secret a number", setTo("/secrets/gh", 5), one("/secrets/gh", CodeWrongType)},
		// extensions
		{"extension unknown", setTo("/extensions/weather", raw(`{}`)), one("/extensions/weather", CodeUnknownReference)},
		{"extension name malformed", setTo("/extensions/Weather!", raw(`{}`)), one("/extensions", CodeInvalidValue)},
		{"extension not an object", setTo("/extensions/introspection", true), one("/extensions/introspection", CodeWrongType)},
		{"extension scope unknown", setTo("/extensions/introspection/scopes", raw(`["ops", "ghost"]`)), one("/extensions/introspection/scopes/1", CodeUnknownReference)},
		{"extension scope malformed", setTo("/extensions/introspection/scopes", raw(`["Ops"]`)), one("/extensions/introspection/scopes/0", CodeInvalidValue)},
		{"extension scope a number", setTo("/extensions/introspection/scopes", raw(`[1]`)), one("/extensions/introspection/scopes/0", CodeWrongType)},
		{"extension enabled a string", setTo("/extensions/introspection/enabled", "yes"), one("/extensions/introspection/enabled", CodeWrongType)},
		{"extension unknown field", setTo("/extensions/introspection/colour", "blue"), one("/extensions/introspection/colour", CodeUnknownField)},
		// scopes
		{"scopes not an object", setTo("/scopes", raw(`[]`)), one("/scopes", CodeWrongType)},
		{"scope id malformed", setTo("/scopes/Ops", raw(`{}`)), one("/scopes", CodeInvalidValue)},
		{"scope id too long", setTo("/scopes/"+strings.Repeat("a", 64), raw(`{}`)), one("/scopes", CodeInvalidValue)},
		{"scope not an object", setTo("/scopes/ops", "ops"), one("/scopes/ops", CodeWrongType)},
		{"scope unknown field", setTo("/scopes/ops/owner", "me"), one("/scopes/ops/owner", CodeUnknownField)},
		{"scope enabled a string", setTo("/scopes/ops/enabled", "no"), one("/scopes/ops/enabled", CodeWrongType)},
		{"scope removed a number", setTo("/scopes/ops/removed", 0), one("/scopes/ops/removed", CodeWrongType)},
		{"parent unknown", setTo("/scopes/ops/parent", "nowhere"), one("/scopes/ops/parent", CodeUnknownReference)},
		{"parent malformed", setTo("/scopes/ops/parent", "Root"), one("/scopes/ops/parent", CodeInvalidValue)},
		{"parent a number", setTo("/scopes/ops/parent", 1), one("/scopes/ops/parent", CodeWrongType)},
		{"parent cycle", setTo("/scopes/root/parent", "ops"), []want{{"/scopes/ops/parent", CodeCycle}, {"/scopes/root/parent", CodeCycle}}},
		{"parent is itself", setTo("/scopes/root/parent", "root"), one("/scopes/root/parent", CodeCycle)},
		{"parent is a tombstone", setTo("/scopes/ops/parent", "old"), one("/scopes/ops/parent", CodeInvalidValue)},
		{"parent became a tombstone", setTo("/scopes/root/removed", true), one("/scopes/ops/parent", CodeInvalidValue)},
		// authorization
		{"authorization not an object", setTo("/scopes/ops/authorization", raw(`[]`)), one("/scopes/ops/authorization", CodeWrongType)},
		{"authorization unknown field", setTo("/scopes/ops/authorization/writes", raw(`[]`)), one("/scopes/ops/authorization/writes", CodeUnknownField)},
		{"operations not an array", setTo("/scopes/ops/authorization/operations", "emit"), one("/scopes/ops/authorization/operations", CodeWrongType)},
		{"operation a number", setTo("/scopes/ops/authorization/operations/0", 5), one("/scopes/ops/authorization/operations/0", CodeWrongType)},
		{"scope operation outside the parent's ceiling", setTo("/scopes/ops/authorization/operations/-", "introspection.scopes"), one("/scopes/ops/authorization/operations/5", CodeAuthorityWidening)},
		{"scope operation the parent denies", setTo("/scopes/ops/authorization/operations/-", "github.pr.edit"), one("/scopes/ops/authorization/operations/5", CodeOperationDenied)},
		{"scope toolset unknown", setTo("/scopes/root/authorization/operations/5", "@github.autor"), one("/scopes/root/authorization/operations/5", CodeUnknownReference)},
		{"scope denial unknown", setTo("/scopes/root/authorization/operations/7", "!github.pr.edt"), one("/scopes/root/authorization/operations/7", CodeUnknownReference)},
		{"read unknown", setTo("/scopes/ops/authorization/reads/-", "secrets"), one("/scopes/ops/authorization/reads/2", CodeInvalidValue)},
		{"read outside the parent's", setTo("/scopes/ops/authorization/reads/-", "artifacts"), one("/scopes/ops/authorization/reads/2", CodeAuthorityWidening)},
		{"emit not an array", setTo("/scopes/ops/authorization/emit", "deploy"), one("/scopes/ops/authorization/emit", CodeWrongType)},
		{"emit family a number", setTo("/scopes/ops/authorization/emit", raw(`["deploy", 5]`)), one("/scopes/ops/authorization/emit/1", CodeWrongType)},
		{"emit family core", setTo("/scopes/ops/authorization/emit", raw(`["deploy", "core"]`)), one("/scopes/ops/authorization/emit/1", CodeInvalidValue)},
		{"emit family malformed", setTo("/scopes/ops/authorization/emit", raw(`["deploy.done"]`)), one("/scopes/ops/authorization/emit/0", CodeInvalidValue)},
		{"emit family an extension's", setTo("/scopes/ops/authorization/emit", raw(`["ci", "github"]`)), one("/scopes/ops/authorization/emit/1", CodeAuthorityWidening)},
		{"emit family outside the parent's", func(t testing.TB, d jdoc) {
			set(t, d, "/scopes/root/authorization/emit", raw(`["deploy", "ci"]`))
			set(t, d, "/scopes/ops/authorization/emit", raw(`["ci", "slack"]`))
		}, one("/scopes/ops/authorization/emit/1", CodeAuthorityWidening)},
		// bindings
		{"bindings not an object", setTo("/scopes/ops/bindings", raw(`[]`)), one("/scopes/ops/bindings", CodeWrongType)},
		{"binding id malformed", setTo("/scopes/ops/bindings/Agent", raw(`{"executor": "shell"}`)), one("/scopes/ops/bindings", CodeInvalidValue)},
		{"binding not an object", setTo(agent, "shell"), one(agent, CodeWrongType)},
		{"binding unknown field", setTo(agent+"/image", "x"), one(agent+"/image", CodeUnknownField)},
		{"executor missing", delAt(agent + "/executor"), one(agent+"/executor", CodeMissingField)},
		{"executor unknown", setTo(agent+"/executor", "docker"), one(agent+"/executor", CodeUnknownReference)},
		{"executor a number", setTo(agent+"/executor", 1), one(agent+"/executor", CodeWrongType)},
		{"executor config not an object", setTo(agent+"/config", raw(`["sh"]`)), one(agent+"/config", CodeWrongType)},
		{"executor config with a null", setTo(agent+"/config/command", raw(`null`)), one(agent+"/config/command", CodeNullValue)},
		{"executor config refused by the executor", setTo(agent+"/config", raw(`{"cmd": "x"}`)), one(agent+"/config", CodeInvalidValue)},
		{"binding operation unknown", setTo(agent+"/operations/-", "github.nothing"), one(agent+"/operations/3", CodeUnknownReference)},
		{"binding operation malformed", setTo(agent+"/operations/0", "Emit"), one(agent+"/operations/0", CodeInvalidValue)},
		{"binding operation empty", setTo(agent+"/operations/0", ""), one(agent+"/operations/0", CodeInvalidValue)},
		{"binding toolset unknown", setTo(agent+"/operations/2", "@github.owner"), one(agent+"/operations/2", CodeUnknownReference)},
		{"binding toolset malformed", setTo(agent+"/operations/2", "@github"), one(agent+"/operations/2", CodeInvalidValue)},
		{"binding denial unknown", setTo(agent+"/operations/-", "!github.nothing"), one(agent+"/operations/3", CodeUnknownReference)},
		{"binding operation outside the ceiling", setTo(agent+"/operations/-", "create_work"), one(agent+"/operations/3", CodeAuthorityWidening)},
		{"binding operation the ceiling denies", setTo(agent+"/operations/-", "github.pr.edit"), one(agent+"/operations/3", CodeOperationDenied)},
		{"binding secrets not an object", setTo(agent+"/secrets", raw(`["gh"]`)), one(agent+"/secrets", CodeWrongType)},
		{"binding secret variable malformed", setTo(agent+"/secrets/gh_token", "gh"), one(agent+"/secrets", CodeInvalidValue)},
		{"binding secret variable reserved", setTo(agent+"/secrets/OS_TOKEN_FILE", "gh"), one(agent+"/secrets/OS_TOKEN_FILE", CodeInvalidValue)},
		{"binding secret variable endpoint reserved", setTo(agent+"/secrets/OS_ENDPOINT", "gh"), one(agent+"/secrets/OS_ENDPOINT", CodeInvalidValue)},
		{"binding secret variable host prefix", setTo(agent+"/secrets/OPEN_CONDUIT_TOKEN", "gh"), one(agent+"/secrets/OPEN_CONDUIT_TOKEN", CodeInvalidValue)},
		{"binding secret unknown", setTo(agent+"/secrets/GH_TOKEN", "github"), one(agent+"/secrets/GH_TOKEN", CodeUnknownReference)},
		{"binding secret a number", setTo(agent+"/secrets/GH_TOKEN", 1), one(agent+"/secrets/GH_TOKEN", CodeWrongType)},
		{"grants not an object", setTo(agent+"/grants", raw(`[]`)), one(agent+"/grants", CodeWrongType)},
		{"grant id malformed", setTo(agent+"/grants/Review", raw(`{"operations": []}`)), one(agent+"/grants", CodeInvalidValue)},
		{"grant unknown field", setTo(agent+"/grants/review/reads", raw(`[]`)), one(agent+"/grants/review/reads", CodeUnknownField)},
		{"grant operation outside the ceiling", setTo(agent+"/grants/review/operations/-", "read_context"), one(agent+"/grants/review/operations/1", CodeAuthorityWidening)},
		{"grant operation the ceiling denies", setTo(agent+"/grants/review/operations/-", "!github.pr.edit"), nil},
		{"grant operation denied explicitly", setTo(agent+"/grants/review/operations/-", "github.pr.edit"), one(agent+"/grants/review/operations/1", CodeOperationDenied)},
		{"requires unknown capability", setTo(agent+"/requires/-", "gpu"), one(agent+"/requires/1", CodeInvalidValue)},
		{"requires a capability the executor lacks", setTo(agent+"/requires/-", "resume"), one(agent+"/requires/1", CodeInvalidCapability)},
		{"requires resume of an executor that has it", func(t testing.TB, d jdoc) {
			set(t, d, agent+"/executor", "agent")
			set(t, d, agent+"/requires/-", "resume")
		}, nil},
		{"requires not an array", setTo(agent+"/requires", "toolbelt"), one(agent+"/requires", CodeWrongType)},
		{"playbook malformed", setTo(agent+"/playbook", "Triage!"), one(agent+"/playbook", CodeInvalidValue)},
		{"playbook a number", setTo(agent+"/playbook", 1), one(agent+"/playbook", CodeWrongType)},
		{"playbook unknown", setTo(agent+"/playbook", "unlisted"), one(agent+"/playbook", CodeUnknownReference)},
		// routes
		{"routes not an array", setTo("/scopes/ops/routes", raw(`{}`)), one("/scopes/ops/routes", CodeWrongType)},
		{"route not an object", setTo(route+"/0", "manual"), one(route+"/0", CodeWrongType)},
		{"route unknown field", setTo(route+"/0/priority", 1), one(route+"/0/priority", CodeUnknownField)},
		{"route id missing", delAt(route + "/0/id"), one(route+"/0/id", CodeMissingField)},
		{"route id malformed", setTo(route+"/0/id", "Manual"), one(route+"/0/id", CodeInvalidValue)},
		{"route id repeated", setTo(route+"/1/id", "manual"), one(route+"/1/id", CodeInvalidValue)},
		{"route match missing", delAt(route + "/0/match"), one(route+"/0/match", CodeMissingField)},
		{"route match not an object", setTo(route+"/0/match", "core.manual"), one(route+"/0/match", CodeWrongType)},
		{"route match type missing", delAt(route + "/0/match/type"), one(route+"/0/match/type", CodeMissingField)},
		{"route match type a bare star", setTo(route+"/0/match/type", "*"), one(route+"/0/match/type", CodeInvalidValue)},
		{"route match type one segment", setTo(route+"/0/match/type", "manual"), one(route+"/0/match/type", CodeInvalidValue)},
		{"route match type a star inside", setTo(route+"/0/match/type", "core.*.x"), one(route+"/0/match/type", CodeInvalidValue)},
		{"route match source malformed", setTo(route+"/0/match/source", "manual"), one(route+"/0/match/source", CodeInvalidValue)},
		{"route match source a prefix", setTo(route+"/0/match/source", "core.*"), one(route+"/0/match/source", CodeInvalidValue)},
		{"route match unknown field", setTo(route+"/0/match/data", "x"), one(route+"/0/match/data", CodeUnknownField)},
		{"route effect unknown", setTo(route+"/0/effect", "launch"), one(route+"/0/effect", CodeInvalidValue)},
		{"route effect inject without a binding", setTo(route+"/2/effect", "inject"), nil},
		{"route samples", setTo(route+"/0/samples", raw(`{"deploy-main": {"type": "deploy.requested", "correlation_key": "deploy/main", "data": {"ref": "main"}}}`)), nil},
		{"route sample the route does not match", setTo(route+"/0/samples", raw(`{"chat": {"type": "chat.message"}}`)), one(route+"/0/samples/chat", CodeInvalidValue)},
		{"route sample of another source", setTo(route+"/0/samples", raw(`{"hook": {"type": "deploy.requested", "source": "github.webhook"}}`)), one(route+"/0/samples/hook", CodeInvalidValue)},
		{"route sample of a core type", setTo(route+"/0/samples", raw(`{"x": {"type": "core.work.finished"}}`)), one(route+"/0/samples/x/type", CodeInvalidValue)},
		{"route sample from a core source", setTo(route+"/1/samples", raw(`{"x": {"type": "github.push", "source": "core.host"}}`)), one(route+"/1/samples/x/source", CodeInvalidValue)},
		{"route sample without a type", setTo(route+"/0/samples", raw(`{"x": {"correlation_key": "k"}}`)), one(route+"/0/samples/x/type", CodeMissingField)},
		{"route sample data not an object", setTo(route+"/0/samples", raw(`{"x": {"type": "deploy.requested", "data": [1]}}`)), one(route+"/0/samples/x/data", CodeWrongType)},
		{"route sample unknown member", setTo(route+"/0/samples", raw(`{"x": {"type": "deploy.requested", "scope": "y"}}`)), one(route+"/0/samples/x/scope", CodeUnknownField)},
		{"route sample name malformed", setTo(route+"/0/samples", raw(`{"Bad Name": {"type": "deploy.requested"}}`)), one(route+"/0/samples", CodeInvalidValue)},
		{"route sample name repeated in the scope", func(t testing.TB, d jdoc) {
			set(t, d, route+"/0/samples", raw(`{"x": {"type": "deploy.requested"}}`))
			set(t, d, route+"/1/samples", raw(`{"x": {"type": "github.push"}}`))
		}, one(route+"/1/samples/x", CodeInvalidValue)},
		{"route effect interrupt without a binding", setTo(route+"/2/effect", "interrupt"), nil},
		{"route binding missing for start", delAt(route + "/0/binding"), one(route+"/0/binding", CodeMissingField)},
		{"route binding missing for the default effect", delAt(route + "/1/binding"), one(route+"/1/binding", CodeMissingField)},
		{"route binding unknown", setTo(route+"/0/binding", "ghost"), one(route+"/0/binding", CodeUnknownReference)},
		{"route binding of another scope", func(t testing.TB, d jdoc) {
			set(t, d, "/scopes/side", raw(`{"parent": "root", "bindings": {"other": {"executor": "shell"}}}`))
			set(t, d, route+"/0/binding", "other")
		}, one(route+"/0/binding", CodeUnknownReference)},
		{"drop route with an unknown binding", setTo(route+"/2/binding", "ghost"), one(route+"/2/binding", CodeUnknownReference)},
		{"route binding a number", setTo(route+"/0/binding", 1), one(route+"/0/binding", CodeWrongType)},
		// tombstones are inert, but their shape is still checked
		{"tombstone with a malformed member", setTo("/scopes/old/bindings/x/image", "x"), one("/scopes/old/bindings/x/image", CodeUnknownField)},
		{"tombstone binding of an unknown executor", setTo("/scopes/old/bindings/x/operations", raw(`["github.nothing"]`)), nil},
	}
}

// TestValidateRules breaks one rule at a time in the valid base and checks
// that exactly the expected diagnostics come out, at the expected pointers.
func TestValidateRules(t *testing.T) {
	cases := ruleCases()
	reg := testRegistry(t)
	seen := map[Code]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := decode(t, baseConfig)
			tc.mut(t, d)
			data := encode(t, d)
			snap, res := Validate(data, reg)
			if g := got(res.Diagnostics); !slices.Equal(g, orNone(tc.want)) {
				t.Fatalf("diagnostics:\n got  %v\n want %v", g, tc.want)
			}
			if (snap != nil) != (len(tc.want) == 0) {
				t.Fatalf("snapshot %v with %d diagnostics", snap != nil, len(tc.want))
			}
			for _, d := range res.Diagnostics {
				if d.Remedy == "" {
					t.Errorf("%s: empty remedy", d.Pointer)
				}
			}
			// Parse agrees with Validate on what is a parse-level problem.
			if _, err := ParseBytes(data); err == nil && !allSemantic(tc.want) {
				t.Errorf("ParseBytes accepted a document Validate refused for its shape")
			}
		})
		for _, w := range tc.want {
			seen[w.code] = true
		}
	}
	// Every code but the ones only raw text can provoke has a case here.
	for _, c := range []Code{CodeUnknownField, CodeNullValue, CodeWrongType, CodeMissingField, CodeInvalidValue,
		CodeUnsupportedVersion, CodeUnknownReference, CodeCycle, CodeAuthorityWidening, CodeOperationDenied,
		CodeInvalidCapability, CodeInvalidSecretReference} {
		if !seen[c] {
			t.Errorf("no case produces %s", c)
		}
	}
}

func orNone(w []want) []want {
	if w == nil {
		return []want{}
	}
	return w
}

// allSemantic reports whether every expected code needs the registry or the
// whole document's meaning (so Parse alone accepts it).
func allSemantic(ws []want) bool {
	for _, w := range ws {
		switch w.code {
		case CodeUnknownReference, CodeCycle, CodeAuthorityWidening, CodeOperationDenied, CodeInvalidCapability:
		default:
			if w.ptr == route+"/1/id" || w.ptr == route+"/1/samples/x" || strings.HasSuffix(w.ptr, "/parent") || strings.HasSuffix(w.ptr, "/config") {
				continue // repeated route id or sample name, tombstone parent, executor refusal: meaning checks
			}
			return false
		}
	}
	return true
}

// rawCase is a document only raw text can write.
type rawCase struct {
	name string
	text string
	want []want
}

// rawCases are the table of TestParseRawText, and seeds of FuzzParse.
func rawCases() []rawCase {
	big := strings.Replace(baseConfig, `"version": 1,`, `"version": 1,`+strings.Repeat(" ", MaxSize-len(baseConfig)), 1)
	if len(big) != MaxSize {
		panic("padding")
	}
	return []rawCase{
		{"exactly 1 MiB", big, nil},
		{"one byte over 1 MiB", big + " ", one("", CodeTooLarge)},
		{"empty", "", one("", CodeInvalidJSON)},
		{"white space only", " \n\t ", one("", CodeInvalidJSON)},
		{"top-level array", `[{"version": 1}]`, one("", CodeWrongType)},
		{"top-level null", `null`, one("", CodeNullValue)},
		{"top-level string", `"version"`, one("", CodeWrongType)},
		{"duplicate top-level key", `{"version": 1, "version": 1}`, one("/version", CodeDuplicateKey)},
		{"duplicate scope", `{"version": 1, "scopes": {"a": {}, "a": {"removed": true}}}`, one("/scopes/a", CodeDuplicateKey)},
		{"duplicate unsafe key", `{"version": 1, "scopes": {"A b": {}, "A b": {}}}`, []want{{"/scopes", CodeDuplicateKey}, {"/scopes", CodeInvalidValue}}},
		{"duplicate inside executor config", `{"version": 1, "scopes": {"a": {"bindings": {"b": {"executor": "agent", "config": {"x": 1, "x": 2}}}}}}`, one("/scopes/a/bindings/b/config/x", CodeDuplicateKey)},
		{"escaped duplicate", `{"version": 1, "vers\u0069on": 1}`, one("/version", CodeDuplicateKey)},
		{"trailing object", `{"version": 1} {}`, one("", CodeInvalidJSON)},
		{"trailing garbage", `{"version": 1} x`, one("", CodeInvalidJSON)},
		{"trailing white space", "{\"version\": 1}\n\n", nil},
		{"missing comma", "{\"version\": 1\n \"scopes\": {}}", one("", CodeInvalidJSON)},
		{"unterminated", `{"version": 1, "scopes": {"a": {`, one("/scopes/a", CodeInvalidJSON)},
		{"syntax error deep", `{"version": 1, "scopes": {"a": {"enabled": tru}}}`, one("/scopes/a/enabled", CodeInvalidJSON)},
		{"invalid UTF-8 in a value", "{\"version\": 1, \"secrets\": {\"gh\": \"env:G\xffH\"}}", one("/secrets/gh", CodeInvalidJSON)},
		{"invalid UTF-8 in a name", "{\"version\": 1, \"scopes\": {\"a\xff\": {}}}", []want{{"/scopes", CodeInvalidJSON}, {"/scopes", CodeInvalidValue}}},
		{"unpaired surrogate", `{"version": 1, "secrets": {"gh": "env:\ud800"}}`, one("/secrets/gh", CodeInvalidJSON)},
		{"byte order mark", "\xef\xbb\xbf{\"version\": 1}", one("", CodeInvalidJSON)},
		{"comment", "{\"version\": 1 // one\n}", one("", CodeInvalidJSON)},
		{"single quotes", `{'version': 1}`, one("", CodeInvalidJSON)},
		{"nulls everywhere", `{"version": null, "limits": {"lease": null}, "scopes": {"a": {"parent": null, "authorization": {"operations": [null]}}}}`,
			[]want{{"/limits/lease", CodeNullValue}, {"/scopes/a/authorization/operations/0", CodeNullValue}, {"/scopes/a/parent", CodeNullValue}, {"/version", CodeNullValue}}},
	}
}

// TestParseRawText covers what only raw text can say: syntax, duplicate
// keys, trailing data, encodings and size.
func TestParseRawText(t *testing.T) {
	cases := rawCases()
	reg := testRegistry(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, res := Validate([]byte(tc.text), reg)
			if g := got(res.Diagnostics); !slices.Equal(g, orNone(tc.want)) {
				t.Fatalf("diagnostics:\n got  %v\n want %v", g, tc.want)
			}
			_, err := ParseBytes([]byte(tc.text))
			if (err == nil) != (len(tc.want) == 0) {
				t.Fatalf("ParseBytes error %v, want error: %v", err, len(tc.want) > 0)
			}
		})
	}
}

func one(ptr string, code Code) []want { return []want{{ptr, code}} }

// TestSyntaxRemedyNamesThePlace checks that a syntax error says where it is
// by line and column.
func TestSyntaxRemedyNamesThePlace(t *testing.T) {
	_, res := Validate([]byte("{\n  \"version\": 1\n  \"scopes\": {}\n}"), testRegistry(t))
	if len(res.Diagnostics) != 1 || !strings.Contains(res.Diagnostics[0].Remedy, "line 3, column 3") {
		t.Fatalf("got %v", res.Diagnostics)
	}
}

// severalErrors breaks the base in nine independent ways.
func severalErrors(t testing.TB) jdoc {
	d := decode(t, baseConfig)
	set(t, d, "/colour", "blue")
	set(t, d, "/limits/lease", raw("null"))
	set(t, d, "/secrets/vault", "cmd:")
	set(t, d, agent+"/requires", raw(`["resume"]`))
	set(t, d, agent+"/grants/review/operations", raw(`["create_work"]`))
	set(t, d, route+"/1/binding", "ghost")
	set(t, d, route+"/2/effect", "launch")
	set(t, d, "/extensions/weather", raw(`{}`))
	set(t, d, "/scopes/side", raw(`{"parent": "nowhere"}`))
	return d
}

var severalWant = []want{
	{"/colour", CodeUnknownField},
	{"/extensions/weather", CodeUnknownReference},
	{"/limits/lease", CodeNullValue},
	{agent + "/grants/review/operations/0", CodeAuthorityWidening},
	{agent + "/requires/0", CodeInvalidCapability},
	{route + "/1/binding", CodeUnknownReference},
	{route + "/2/effect", CodeInvalidValue},
	{"/scopes/side/parent", CodeUnknownReference},
	{"/secrets/vault", CodeInvalidSecretReference},
}

// TestSeveralErrorsAllReportedInOrder: every independent problem comes back
// together, in the same order every run and whatever the order of the
// members in the file.
func TestSeveralErrorsAllReportedInOrder(t *testing.T) {
	reg := testRegistry(t)
	d := severalErrors(t)
	rng := rand.New(rand.NewPCG(1, 2))
	var first []Diagnostic
	for i := range 25 {
		data := encode(t, d)
		if i > 0 {
			data = shuffled(t, d, rng)
		}
		_, res := Validate(data, reg)
		if g := got(res.Diagnostics); !slices.Equal(g, severalWant) {
			t.Fatalf("run %d:\n got  %v\n want %v", i, g, severalWant)
		}
		if first == nil {
			first = res.Diagnostics
		} else if !reflect.DeepEqual(first, res.Diagnostics) {
			t.Fatalf("run %d differs from the first:\n%v\n%v", i, res.Diagnostics, first)
		}
	}
}

// shuffled encodes v with its object members in a random order and random
// white space.
func shuffled(t testing.TB, v any, rng *rand.Rand) []byte {
	var b strings.Builder
	ws := func() {
		b.WriteString([]string{"", " ", "\n", "\t ", "\r\n  "}[rng.IntN(5)])
	}
	var walk func(v any)
	walk = func(v any) {
		ws()
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
			b.WriteByte('{')
			for i, k := range keys {
				if i > 0 {
					b.WriteByte(',')
				}
				ws()
				b.Write(encode(t, k))
				ws()
				b.WriteByte(':')
				walk(x[k])
			}
			ws()
			b.WriteByte('}')
		case []any:
			b.WriteByte('[')
			for i, e := range x {
				if i > 0 {
					b.WriteByte(',')
				}
				walk(e)
			}
			ws()
			b.WriteByte(']')
		default:
			b.Write(encode(t, x))
		}
		ws()
	}
	walk(v)
	return []byte(b.String())
}

// TestDefaults checks the defaults a minimal configuration gets.
func TestDefaults(t *testing.T) {
	text := `{"version": 1, "scopes": {"a": {"authorization": {"operations": ["emit"]},
		"bindings": {"b": {"executor": "shell"}}, "routes": [{"id": "r", "match": {"type": "core.manual"}, "binding": "b"}]}}}`
	snap, res := Validate([]byte(text), testRegistry(t))
	if !res.Valid() {
		t.Fatal(res.Diagnostics)
	}
	if got := snap.Limits(); got != DefaultLimits() {
		t.Errorf("limits %+v, want %+v", got, DefaultLimits())
	}
	want := Limits{CausalMaxDepth: 8, CausalPerMinute: 60, MaxRunning: 4, AttemptTimeout: 3600e9, Lease: 30e9}
	if DefaultLimits() != want {
		t.Errorf("DefaultLimits %+v", DefaultLimits())
	}
	sc, _ := snap.Scope("a")
	if !sc.Enabled || sc.Removed || !sc.Active {
		t.Errorf("scope defaults: %+v", sc)
	}
	if r := sc.Routes[0]; r.Effect != EffectStart || r.Match.Source != "" {
		t.Errorf("route defaults: %+v", r)
	}
	b, _ := snap.Binding("a", "b")
	if string(b.Config) != "{}" || len(b.Operations) != 0 || len(b.Secrets) != 0 || len(b.Grants) != 0 {
		t.Errorf("binding defaults: %+v", b)
	}
	if ok, _ := snap.ExtensionEnabled("introspection"); ok {
		t.Error("an opt-in extension not in the file is enabled")
	}
	if ok, scopes := snap.ExtensionEnabled("github"); !ok || scopes != nil {
		t.Errorf("an extension not in the file that is not opt-in is enabled %v in %v, want everywhere", ok, scopes)
	}
	if ok, _ := snap.ExtensionEnabled("unregistered"); ok {
		t.Error("an extension the registry does not know is enabled")
	}
}

func ExampleValidate() {
	reg := DefaultRegistry(executor.Info{Name: "shell", Transport: executor.TransportOS, Capabilities: []executor.Capability{executor.CapToolbelt}})
	_, res := Validate([]byte(`{"version": 1, "scopes": {"ops": {"parent": "nowhere", "bindings": {"agent": {"executor": "docker"}}}}}`), reg)
	for _, d := range res.Diagnostics {
		fmt.Println(d.Pointer, d.Code)
	}
	// Output:
	// /scopes/ops/bindings/agent/executor unknown_reference
	// /scopes/ops/parent unknown_reference
}

// TestExecutorConfigProblems: an executor's problems are placed by their
// pointers (array indexes told apart by the config's shape), unknown codes
// become invalid_value and an empty remedy gets a generic one.
func TestExecutorConfigProblems(t *testing.T) {
	reg := NewRegistry()
	must(t, reg.AddExecutor(executor.Info{Name: "probe"}, func(json.RawMessage) error {
		return fmt.Errorf("wrapped: %w", &ExecutorConfigError{Problems: []Diagnostic{
			{Pointer: "/command/1", Code: "weird_code"},
			{Pointer: "/a~1b", Code: CodeWrongType, Remedy: "give a string"},
			{Pointer: "/command/x", Code: CodeInvalidValue, Remedy: "r"},
			{Pointer: "not-a-pointer", Code: CodeMissingField, Remedy: "r"},
			{Pointer: "", Code: CodeInvalidValue, Remedy: "r"},
		}})
	}))
	text := `{"version": 1, "scopes": {"a": {"bindings": {"b": {"executor": "probe", "config": {"command": ["x", "y"]}}}}}}`
	_, res := Validate([]byte(text), reg)
	base := "/scopes/a/bindings/b/config"
	want := []want{
		{base, CodeInvalidValue},
		{base, CodeMissingField},
		{base, CodeWrongType}, // "a/b" is not safe to show
		{base + "/command", CodeInvalidValue},
		{base + "/command/1", CodeInvalidValue},
	}
	if g := got(res.Diagnostics); !slices.Equal(g, want) {
		t.Fatalf("got  %v\nwant %v", g, want)
	}
	for _, d := range res.Diagnostics {
		if d.Remedy == "" {
			t.Errorf("%v: empty remedy", d)
		}
	}
}

// TestParse: parsing alone, from a reader, with defaults applied and no
// registry; a refusal is an *Error with every diagnostic.
func TestParse(t *testing.T) {
	cfg, err := Parse(strings.NewReader(baseConfig))
	if err != nil {
		t.Fatal(err)
	}
	ops := cfg.Scopes["ops"]
	if cfg.Version != 1 || cfg.Limits != DefaultLimits() || !ops.Enabled || ops.Routes[1].Effect != EffectStart ||
		!slices.Equal(ops.Bindings["agent"].Operations, []string{"emit", "declare_outcome", "@github.author"}) ||
		cfg.Secrets["gh"].Scheme() != SchemeEnv || cfg.Extensions["introspection"].Scopes[0] != "ops" {
		t.Fatalf("parsed %+v", cfg)
	}
	// Parse needs no registry: an unknown executor is Validate's to refuse.
	if _, err := Parse(strings.NewReader(`{"version": 1, "scopes": {"a": {"bindings": {"b": {"executor": "docker"}}}}}`)); err != nil {
		t.Fatal(err)
	}
	_, err = Parse(strings.NewReader(`{"version": 1, "colour": 1, "limits": null}` + strings.Repeat(" ", 10)))
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Diagnostics) != 2 || !strings.Contains(err.Error(), "2 problems") {
		t.Fatalf("%v", err)
	}
	_, err = Parse(io.MultiReader(strings.NewReader(`{"version": 1}`), strings.NewReader(strings.Repeat(" ", MaxSize))))
	if !errors.As(err, &ce) || ce.Diagnostics[0].Code != CodeTooLarge {
		t.Fatalf("%v", err)
	}
	if _, err := ReadFile(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Fatal("read a missing file")
	}
}
