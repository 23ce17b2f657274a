package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/executor"
)

func sprint(v any) string  { return fmt.Sprint(v) }
func sprintq(v any) string { return fmt.Sprintf("%q %x %s", v, v, v) }
func sprintv(v any) string { return fmt.Sprintf("%+v %#v", v, v) }

func validSnapshot(t *testing.T, d jdoc) *Snapshot {
	t.Helper()
	snap, res := Validate(encode(t, d), testRegistry(t))
	if !res.Valid() {
		t.Fatalf("invalid: %v", res.Diagnostics)
	}
	return snap
}

// TestHashIgnoresKeyOrderAndWhiteSpace: the same configuration written in
// many ways has one hash; any change of meaning changes it.
func TestHashIgnoresKeyOrderAndWhiteSpace(t *testing.T) {
	reg := testRegistry(t)
	base, res := Validate([]byte(baseConfig), reg)
	if !res.Valid() {
		t.Fatal(res.Diagnostics)
	}
	if len(base.Hash) != 64 {
		t.Fatalf("hash %q is not hex SHA-256", base.Hash)
	}
	d := decode(t, baseConfig)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 20 {
		data := shuffled(t, d, rng)
		snap, res := Validate(data, reg)
		if !res.Valid() {
			t.Fatalf("shuffle %d invalid: %v", i, res.Diagnostics)
		}
		if snap.Hash != base.Hash {
			t.Fatalf("shuffle %d: hash %s, want %s", i, snap.Hash, base.Hash)
		}
		if !bytes.Equal(snap.Normalized, base.Normalized) {
			t.Fatalf("shuffle %d: normalized form differs", i)
		}
	}
	// The same number written differently is the same value.
	alt := strings.Replace(baseConfig, `"max_running": 4`, `"max_running": 4`, 1)
	if snap, _ := Validate([]byte(alt), reg); snap.Hash != base.Hash {
		t.Fatal("identical text hashed differently")
	}
	changes := map[string]func(d jdoc){
		"secret reference": func(d jdoc) { set(t, d, "/secrets/gh", "env:OTHER_TOKEN") },
		"list order":       func(d jdoc) { set(t, d, agent+"/operations", raw(`["declare_outcome", "emit", "@github.author"]`)) },
		"default written":  func(d jdoc) { set(t, d, "/scopes/root/enabled", true) },
		"executor config":  func(d jdoc) { set(t, d, agent+"/config/command/2", "./run2.sh") },
	}
	for name, change := range changes {
		d := decode(t, baseConfig)
		change(d)
		if snap := validSnapshot(t, d); snap.Hash == base.Hash {
			t.Errorf("%s: hash unchanged", name)
		}
	}
}

// TestHashKeepsToolsetsUnresolved: a release that adds an operation to a
// toolset keeps the hash and the normalized form, and grants the operation.
func TestHashKeepsToolsetsUnresolved(t *testing.T) {
	reg1 := testRegistry(t)
	reg2 := NewRegistry()
	for _, name := range []string{"shell", "agent"} {
		info, _ := reg1.Executor(name)
		must(t, reg2.AddExecutor(info, nil))
	}
	author, _ := reg1.Toolset("github.author")
	author.Operations = append(slices.Clone(author.Operations), extension.ToolsetOperation{Name: "github.pr.merge", Since: "1.5.0"})
	reviewer, _ := reg1.Toolset("github.reviewer")
	ops := append(reg1Ops(reg1, "github."), "github.pr.merge")
	must(t, reg2.AddExtension("github", ops, []extension.Toolset{author, reviewer}))
	must(t, reg2.AddExtension("introspection", []string{"introspection.scopes"}, nil))
	must(t, reg2.AddPlaybook("triage", []string{"emit", "github.issue.view", "github.issue.comment"}))

	s1, r1 := Validate([]byte(baseConfig), reg1)
	s2, r2 := Validate([]byte(baseConfig), reg2)
	if !r1.Valid() || !r2.Valid() {
		t.Fatal(r1.Diagnostics, r2.Diagnostics)
	}
	if s1.Hash != s2.Hash || !bytes.Equal(s1.Normalized, s2.Normalized) {
		t.Fatal("a toolset's new member changed the hash or the normalized form")
	}
	if s1.AuthorizeOperation("ops", "github.pr.merge") || !s2.AuthorizeOperation("ops", "github.pr.merge") {
		t.Fatal("the new member is not granted through the toolset")
	}
	b2, _ := s2.BindingOperations("ops", "agent")
	if !slices.Contains(b2, "github.pr.merge") {
		t.Fatalf("binding operations %v lack the toolset's new member", b2)
	}
}

func reg1Ops(reg *Registry, prefix string) []string {
	var out []string
	for _, op := range reg.Operations() {
		if strings.HasPrefix(op, prefix) {
			out = append(out, op)
		}
	}
	return out
}

// TestNormalizedRedactsSecretReferences: the normalized form keeps the
// scheme of each reference and nothing else of it.
func TestNormalizedRedactsSecretReferences(t *testing.T) {
	snap := validSnapshot(t, decode(t, baseConfig))
	var doc struct {
		Secrets map[string]string `json:"secrets"`
	}
	if err := json.Unmarshal(snap.Normalized, &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"gh": "env:<redacted>", "slack": "keyring:<redacted>", "db": "file:<redacted>", "vault": "cmd:<redacted>"}
	if !mapsEqual(doc.Secrets, want) {
		t.Fatalf("secrets %v, want %v", doc.Secrets, want)
	}
	for _, text := range []string{"env:GH_TOKEN", "open-conduit/slack", "db_password", "pass show"} {
		if bytes.Contains(snap.Normalized, []byte(text)) {
			t.Errorf("normalized form holds %q", text)
		}
	}
	// Toolsets stay as written, and the form is canonical JSON.
	if !bytes.Contains(snap.Normalized, []byte(`"@github.author"`)) {
		t.Error("toolset resolved in the normalized form")
	}
	if !json.Valid(snap.Normalized) || bytes.ContainsAny(snap.Normalized, "\n\t") {
		t.Error("normalized form is not compact JSON")
	}
	// A redacted form never validates as the original.
	_, res := Validate(snap.Normalized, testRegistry(t))
	if res.Valid() {
		t.Error("the redacted form validates")
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestSecretRefNeverPrintsItsText: every printed and marshalled form of a
// reference is redacted.
func TestSecretRefNeverPrintsItsText(t *testing.T) {
	ref, err := ParseSecretRef("cmd:pass show zebra-canary")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]SecretRef{"x": ref})
	for _, s := range []string{ref.String(), ref.GoString(), string(b), sprint(ref), sprintq(ref), sprintv(ref)} {
		if strings.Contains(s, "zebra") {
			t.Errorf("printed form %q holds the text", s)
		}
	}
	if ref.Reference() != "cmd:pass show zebra-canary" || ref.Scheme() != SchemeCmd {
		t.Error("Reference or Scheme lost the reference")
	}
}

// TestEffectiveAuthority: ceilings are resolved and narrowed; a toolset is
// narrowed to the ceiling; denials hold; disabled scopes and the children
// of disabled scopes authorize nothing; tombstones run nothing.
func TestEffectiveAuthority(t *testing.T) {
	snap := validSnapshot(t, decode(t, baseConfig))
	root, _ := snap.Scope("root")
	wantRoot := []string{"emit", "create_work", "wait", "declare_outcome", "read_context",
		"github.issue.view", "github.issue.comment", "github.pr.create", "github.git.credential", "github.pr.review"}
	if !slices.Equal(root.Operations, wantRoot) {
		t.Errorf("root ceiling %v\nwant %v", root.Operations, wantRoot)
	}
	ops, _ := snap.Scope("ops")
	wantOps := []string{"emit", "wait", "declare_outcome", "github.issue.view", "github.issue.comment", "github.pr.create", "github.git.credential", "github.pr.review"}
	if !slices.Equal(ops.Operations, wantOps) {
		t.Errorf("ops ceiling %v\nwant %v", ops.Operations, wantOps)
	}
	bops, _ := snap.BindingOperations("ops", "agent")
	wantB := []string{"emit", "declare_outcome", "github.issue.view", "github.issue.comment", "github.pr.create", "github.git.credential"}
	if !slices.Equal(bops, wantB) {
		t.Errorf("binding operations %v\nwant %v", bops, wantB)
	}
	if g, ok := snap.GrantOperations("ops", "agent", "review"); !ok || !slices.Equal(g, []string{"github.pr.review"}) {
		t.Errorf("grant %v %v", g, ok)
	}
	if _, ok := snap.GrantOperations("ops", "agent", "nope"); ok {
		t.Error("unknown grant found")
	}
	if sec, _ := snap.BindingSecrets("ops", "agent"); !mapsEqual(sec, map[string]string{"GH_TOKEN": "gh"}) {
		t.Errorf("binding secrets %v", sec)
	}
	if ref, ok := snap.Secret("gh"); !ok || ref.Reference() != "env:GH_TOKEN" {
		t.Error("secret gh")
	}
	if !slices.Equal(snap.SecretNames(), []string{"db", "gh", "slack", "vault"}) {
		t.Errorf("secret names %v", snap.SecretNames())
	}
	for _, c := range []struct {
		scope, op string
		want      bool
	}{
		{"ops", "emit", true},
		{"ops", "create_work", false},     // not in ops's list
		{"ops", "github.pr.edit", false},  // denied by root
		{"root", "github.pr.edit", false}, // denied
		{"root", "create_work", true},
		{"old", "emit", false},   // tombstone
		{"ghost", "emit", false}, // unknown scope
		{"ops", "not.an.op", false},
	} {
		if got := snap.AuthorizeOperation(c.scope, c.op); got != c.want {
			t.Errorf("AuthorizeOperation(%s, %s) = %v", c.scope, c.op, got)
		}
	}
	if !snap.AuthorizeRead("ops", ReadEvents) || snap.AuthorizeRead("ops", ReadExecutions) || !snap.AuthorizeRead("root", ReadExecutions) {
		t.Error("AuthorizeRead")
	}
	old, _ := snap.Scope("old")
	if old.Active || old.Bindings != nil || old.Routes != nil || len(old.Operations) != 0 {
		t.Errorf("tombstone %+v", old)
	}
	if _, ok := snap.Binding("old", "x"); ok {
		t.Error("a tombstone's binding is returned")
	}
	if on, scopes := snap.ExtensionEnabled("introspection"); !on || !slices.Equal(scopes, []string{"ops"}) {
		t.Errorf("introspection %v %v", on, scopes)
	}

	// Disabled scope, then disabled parent.
	d := decode(t, baseConfig)
	set(t, d, "/scopes/ops/enabled", false)
	snap = validSnapshot(t, d)
	if snap.AuthorizeOperation("ops", "emit") || snap.AuthorizeRead("ops", ReadWork) || !snap.AuthorizeOperation("root", "emit") {
		t.Error("disabled scope still authorizes")
	}
	d = decode(t, baseConfig)
	set(t, d, "/scopes/root/enabled", false)
	snap = validSnapshot(t, d)
	if snap.AuthorizeOperation("ops", "emit") || snap.AuthorizeOperation("root", "emit") {
		t.Error("child of a disabled scope still authorizes")
	}
	if sc, _ := snap.Scope("ops"); !sc.Enabled || sc.Active {
		t.Errorf("ops %+v", sc)
	}
	// A disabled parent still bounds its children's lists.
	set(t, d, agent+"/operations/-", "create_work")
	if _, res := Validate(encode(t, d), testRegistry(t)); res.Valid() {
		t.Error("a disabled parent no longer bounds its child")
	}
}

func TestDomainScopes(t *testing.T) {
	snap := validSnapshot(t, decode(t, baseConfig))
	got := snap.DomainScopes()
	want := []DomainScope{
		{ID: "old", Parent: "gone", Enabled: true, Removed: true, Active: false, Bindings: []string{}, Routes: []string{}},
		{ID: "ops", Parent: "root", Enabled: true, Active: true, Bindings: []string{"agent"}, Routes: []string{"manual", "github", "noise"}},
		{ID: "root", Enabled: true, Active: true, Bindings: []string{}, Routes: []string{}},
	}
	b1, _ := json.Marshal(got)
	b2, _ := json.Marshal(want)
	if !bytes.Equal(b1, b2) {
		t.Fatalf("domain scopes\n got  %s\n want %s", b1, b2)
	}
}

// TestResolveOperations: in order, toolsets expanded to their registered
// members, less denials; unknown or malformed entries are errors.
func TestResolveOperations(t *testing.T) {
	reg := testRegistry(t)
	cases := []struct {
		list []string
		want []string
	}{
		{[]string{}, []string{}},
		{[]string{"wait", "emit", "wait"}, []string{"wait", "emit"}},
		{[]string{"@github.reviewer"}, []string{"github.issue.view", "github.pr.review"}},
		{[]string{"@github.author", "!github.pr.edit", "!emit"}, []string{"github.issue.view", "github.issue.comment", "github.pr.create", "github.git.credential"}},
		{[]string{"!github.pr.edit", "@github.author"}, []string{"github.issue.view", "github.issue.comment", "github.pr.create", "github.git.credential", "emit"}},
		{[]string{"@github.author", "!@github.reviewer"}, []string{"github.issue.comment", "github.pr.create", "github.git.credential", "github.pr.edit", "emit"}},
		{[]string{"github.pr.review", "@github.reviewer"}, []string{"github.pr.review", "github.issue.view"}},
	}
	for _, c := range cases {
		got, err := ResolveOperations(c.list, reg)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ResolveOperations(%v) = %v, %v; want %v", c.list, got, err, c.want)
		}
	}
	_, err := ResolveOperations([]string{"emit", "github.nope", "@github.nope", "!github.nope", "Bad", "!@"}, reg)
	var le *ListError
	if !errors.As(err, &le) {
		t.Fatalf("error %v", err)
	}
	want := []want{{"/1", CodeUnknownReference}, {"/2", CodeUnknownReference}, {"/3", CodeUnknownReference}, {"/4", CodeInvalidValue}, {"/5", CodeInvalidValue}}
	if g := got(le.Problems); !slices.Equal(g, want) {
		t.Fatalf("problems %v, want %v", g, want)
	}
	if strings.Contains(err.Error(), "nope") {
		t.Error("the error echoes an entry")
	}
}

// TestToolsetGrantsOnlyRegisteredOperations: a toolset member the registry
// doesn't register is not granted.
func TestToolsetGrantsOnlyRegisteredOperations(t *testing.T) {
	reg := NewRegistry()
	must(t, reg.AddExtension("gh", []string{"gh.a"}, []extension.Toolset{{Name: "gh.role", Operations: []extension.ToolsetOperation{{Name: "gh.a"}, {Name: "gh.b"}}}}))
	got, err := ResolveOperations([]string{"@gh.role"}, reg)
	if err != nil || !slices.Equal(got, []string{"gh.a"}) {
		t.Fatalf("%v %v", got, err)
	}
}

func TestRegistryRefusesBadRegistrations(t *testing.T) {
	reg := testRegistry(t)
	for name, err := range map[string]error{
		"squatting":          reg.AddExtension("slack", []string{"github.x"}, nil),
		"builtin":            reg.AddExtension("slack", []string{"emit"}, nil),
		"taken":              reg.AddExtension("github", nil, nil),
		"bad name":           reg.AddExtension("Slack", nil, nil),
		"foreign toolset":    reg.AddExtension("slack", []string{"slack.reply"}, []extension.Toolset{{Name: "slack.x", Operations: []extension.ToolsetOperation{{Name: "github.pr.edit"}}}}),
		"duplicate executor": reg.AddExecutor(executor.Info{Name: "shell"}, nil),
		"nameless executor":  reg.AddExecutor(executor.Info{}, nil),
		"bad playbook":       reg.AddPlaybook("Bad!", nil),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if slices.Contains(reg.Extensions(), "slack") {
		t.Error("a refused extension registered something")
	}
	if _, ok := reg.OperationOwner("slack.reply"); ok {
		t.Error("a refused extension's operation is registered")
	}
}

// TestDocumentedExamples: every configuration in docs/config.md is valid
// against a registry that has what the examples name.
func TestDocumentedExamples(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "..", "docs", "config.md"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, block := range strings.Split(string(text), "```json\n")[1:] {
		block = block[:strings.Index(block, "```")]
		if !strings.Contains(block, `"version"`) {
			continue
		}
		n++
		_, res := Validate([]byte(block), testRegistry(t))
		if !res.Valid() {
			t.Errorf("documented example %d is invalid: %v", n, res.Diagnostics)
		}
		for _, w := range res.Warnings {
			if w.Code == WarnRouteNeverFires {
				t.Errorf("documented example %d has a route that never fires: %v", n, w)
			}
		}
		// That the examples naming nothing an extension registers pass the
		// release's registry is internal/bootstrap's test.
	}
	if n < 4 {
		t.Fatalf("%d examples found, want 4", n)
	}
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		m        Match
		typ, src string
		want     bool
	}{
		{Match{Type: "core.manual"}, "core.manual", "x.y", true},
		{Match{Type: "core.manual"}, "core.manual.retry", "x.y", false},
		{Match{Type: "github.*"}, "github.pr.opened", "github.webhook", true},
		{Match{Type: "github.*"}, "github", "github.webhook", false},
		{Match{Type: "github.*"}, "githubx.pr", "github.webhook", false},
		{Match{Type: "github.pr.*"}, "github.pr.opened", "s.s", true},
		{Match{Type: "core.manual", Source: "core.manual"}, "core.manual", "core.action", false},
		{Match{Type: "core.manual", Source: "core.manual"}, "core.manual", "core.manual", true},
	} {
		if got := c.m.Matches(c.typ, c.src); got != c.want {
			t.Errorf("%+v.Matches(%s, %s) = %v", c.m, c.typ, c.src, got)
		}
	}
}

func TestNilRegistryIsTheBuiltins(t *testing.T) {
	if _, res := Validate([]byte(`{"version": 1, "scopes": {"a": {"authorization": {"operations": ["emit", "github.x"]}}}}`), nil); len(res.Diagnostics) != 1 {
		t.Fatalf("%v", res.Diagnostics)
	}
	if ops, err := ResolveOperations([]string{"emit"}, nil); err != nil || !slices.Equal(ops, []string{"emit"}) {
		t.Fatalf("%v %v", ops, err)
	}
}

// TestEmitFamilies: authorization.emit restricts the families a scope's
// executions may emit, a child inherits its parent's rule when it states
// none and narrows it when it does, and without any the scope allows every
// family (the toolbelt's own rule still applies).
func TestEmitFamilies(t *testing.T) {
	snap := validSnapshot(t, decode(t, baseConfig))
	for _, id := range []string{"root", "ops"} {
		sc, _ := snap.Scope(id)
		if sc.EmitRestricted || sc.Emit != nil || !snap.AllowEmit(id, "deploy.done") || !snap.AllowEmit(id, "anything.else") {
			t.Fatalf("%s without authorization.emit: %+v", id, sc)
		}
	}
	d := decode(t, baseConfig)
	set(t, d, "/scopes/root/authorization/emit", raw(`["deploy", "ci", "deploy"]`))
	snap = validSnapshot(t, d)
	for _, id := range []string{"root", "ops"} {
		sc, _ := snap.Scope(id)
		if !sc.EmitRestricted || !slices.Equal(sc.Emit, []string{"ci", "deploy"}) {
			t.Fatalf("%s under root's rule: %v %v", id, sc.EmitRestricted, sc.Emit)
		}
		if !snap.AllowEmit(id, "deploy.done") || !snap.AllowEmit(id, "ci.passed") || snap.AllowEmit(id, "slack.message") || snap.AllowEmit(id, "deployx.done") {
			t.Fatalf("%s allows the wrong families", id)
		}
	}
	set(t, d, "/scopes/ops/authorization/emit", raw(`["ci"]`))
	snap = validSnapshot(t, d)
	if snap.AllowEmit("ops", "deploy.done") || !snap.AllowEmit("ops", "ci.passed") || !snap.AllowEmit("root", "deploy.done") {
		t.Fatal("ops does not narrow root's rule")
	}
	set(t, d, "/scopes/ops/authorization/emit", raw(`[]`))
	snap = validSnapshot(t, d)
	if sc, _ := snap.Scope("ops"); !sc.EmitRestricted || len(sc.Emit) != 0 || snap.AllowEmit("ops", "ci.passed") {
		t.Fatalf("an empty list allows nothing: %+v", sc)
	}
	if snap.AllowEmit("nowhere", "ci.passed") {
		t.Fatal("an unknown scope allows an emission")
	}
	if got := snap.Config().Scopes["ops"].Authorization.Emit; got == nil || len(got) != 0 {
		t.Fatalf("written emit = %#v", got)
	}
}
