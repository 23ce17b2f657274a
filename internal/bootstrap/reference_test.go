package bootstrap

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
)

// update regenerates docs/operations.md and records new toolset members
// in testdata/toolsets.json (go generate ./internal/bootstrap).
var update = flag.Bool("update", false, "regenerate docs/operations.md and record new toolset members in testdata/toolsets.json")

const (
	referencePath     = "../../docs/operations.md"
	toolsetRecordPath = "testdata/toolsets.json"
	regenerate        = "go generate ./internal/bootstrap"
)

// releaseHost is the release's registry with its bundled extensions
// registered, as the daemon command composes it.
func releaseHost(t testing.TB) *toolbelt.Host {
	t.Helper()
	host := toolbelt.NewHost(ReleaseRegistry())
	for _, ext := range Extensions(Ports{}) {
		if err := host.Register(ext); err != nil {
			t.Fatalf("the bundled extension %s does not register: %v", ext.Name, err)
		}
	}
	return host
}

// TestOperationsReference: docs/operations.md is what this release's
// registry renders.
func TestOperationsReference(t *testing.T) {
	got := renderReference(releaseHost(t))
	if *update {
		if err := os.WriteFile(referencePath, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	have, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatalf("%v: run %s", err, regenerate)
	}
	if !bytes.Equal(have, got) {
		t.Fatalf("docs/operations.md is stale: it is not what this release's registry renders; run %s", regenerate)
	}
}

// toolsetRecord is every bundled toolset's members, by toolset, as
// releases published them.
type toolsetRecord map[string][]extension.ToolsetOperation

// TestToolsetsOnlyGain: no release removes an operation from a bundled
// toolset, nor changes the version it joined in, and every member is
// recorded.
func TestToolsetsOnlyGain(t *testing.T) {
	var record toolsetRecord
	data, err := os.ReadFile(toolsetRecordPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &record); err != nil {
		t.Fatal(err)
	}
	current := releaseHost(t).Toolsets()
	if *update {
		record = recordNew(record, current)
		out, err := json.MarshalIndent(record, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(toolsetRecordPath, append(out, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range compareToolsets(record, current) {
		t.Error(p)
	}
}

// compareToolsets says what breaks the rule that toolsets only gain.
func compareToolsets(record toolsetRecord, current []extension.Toolset) []string {
	byName := map[string]extension.Toolset{}
	for _, ts := range current {
		byName[ts.Name] = ts
	}
	var problems []string
	for _, name := range sortedNames(record) {
		ts, ok := byName[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("toolset %s was published and this release removes it: a toolset only gains operations", name))
			continue
		}
		for _, was := range record[name] {
			i := slices.IndexFunc(ts.Operations, func(op extension.ToolsetOperation) bool { return op.Name == was.Name })
			switch {
			case i < 0:
				problems = append(problems, fmt.Sprintf("toolset %s loses %s (since %s): a toolset only gains operations", name, was.Name, was.Since))
			case ts.Operations[i].Since != was.Since:
				problems = append(problems, fmt.Sprintf("toolset %s says %s joined in %s, but it joined in %s", name, was.Name, ts.Operations[i].Since, was.Since))
			}
		}
	}
	for _, ts := range current {
		for _, op := range ts.Operations {
			if !slices.ContainsFunc(record[ts.Name], func(r extension.ToolsetOperation) bool { return r.Name == op.Name }) {
				problems = append(problems, fmt.Sprintf("toolset %s's member %s is not recorded in %s: run %s", ts.Name, op.Name, toolsetRecordPath, regenerate))
			}
		}
	}
	return problems
}

// recordNew adds to the record what the release's toolsets have that it
// lacks; it never removes nor changes a recorded member.
func recordNew(record toolsetRecord, current []extension.Toolset) toolsetRecord {
	out := toolsetRecord{}
	for name, ops := range record {
		out[name] = slices.Clone(ops)
	}
	for _, ts := range current {
		for _, op := range ts.Operations {
			if !slices.ContainsFunc(out[ts.Name], func(r extension.ToolsetOperation) bool { return r.Name == op.Name }) {
				out[ts.Name] = append(out[ts.Name], op)
			}
		}
	}
	return out
}

// The comparison fails on each way a release could break the rule.
func TestCompareToolsetsControls(t *testing.T) {
	record := toolsetRecord{"acme.author": {{Name: "acme.read", Since: "1.0.0"}, {Name: "emit", Since: "1.0.0"}}}
	same := []extension.Toolset{{Name: "acme.author", Operations: record["acme.author"]}}
	if p := compareToolsets(record, same); len(p) != 0 {
		t.Fatal(p)
	}
	cases := map[string][]extension.Toolset{
		"a member removed":  {{Name: "acme.author", Operations: []extension.ToolsetOperation{{Name: "emit", Since: "1.0.0"}}}},
		"a toolset removed": {{Name: "acme.reviewer", Operations: record["acme.author"]}},
		"a since changed":   {{Name: "acme.author", Operations: []extension.ToolsetOperation{{Name: "acme.read", Since: "1.2.0"}, {Name: "emit", Since: "1.0.0"}}}},
		"a member unrecorded": {{Name: "acme.author", Operations: append(slices.Clone(record["acme.author"]),
			extension.ToolsetOperation{Name: "acme.write", Since: "1.1.0"})}},
	}
	for name, current := range cases {
		if p := compareToolsets(record, current); len(p) == 0 {
			t.Errorf("%s passes", name)
		}
		// Recording the new members never hides a removal.
		if p := compareToolsets(recordNew(record, current), current); (len(p) == 0) != (name == "a member unrecorded") {
			t.Errorf("%s after recording: %v", name, p)
		}
	}
}

// renderReference renders the operations reference: every operation the
// release serves with its summary and input schema, every toolset with
// its members and the version each joined in, and every bundled playbook
// with the operations it declares.
func renderReference(host *toolbelt.Host) []byte {
	var b bytes.Buffer
	b.WriteString("# Operations reference\n\n")
	b.WriteString("Generated from this release's registry: its builtins and the extensions\nit bundles (extensions a daemon registers besides them are not listed).\nDo not edit it by hand; regenerate it with `" + regenerate + "`.\n\n")
	b.WriteString("## Operations\n")
	for _, op := range host.Operations() {
		fmt.Fprintf(&b, "\n### `%s`\n\n", op.Name)
		if extension.IsBuiltin(op.Name) {
			b.WriteString("A builtin: the host serves it, and it passes no gate.\n\n")
		} else {
			reg, _, _ := strings.Cut(op.Name, ".")
			fmt.Fprintf(&b, "Served by the `%s` extension.\n\n", reg)
		}
		b.WriteString(op.Summary + "\n\n")
		if len(op.Capabilities) > 0 {
			fmt.Fprintf(&b, "Capabilities: `%s`.\n\n", strings.Join(op.Capabilities, "`, `"))
		}
		var schema bytes.Buffer
		if err := json.Indent(&schema, op.InputSchema, "", "  "); err != nil {
			schema.Reset()
			schema.Write(op.InputSchema)
		}
		fmt.Fprintf(&b, "Input schema:\n\n```json\n%s\n```\n", schema.String())
	}
	b.WriteString("\n## Toolsets\n\n")
	b.WriteString("A binding grants a toolset as `@<name>`. A toolset only gains operations\nfrom one release to the next; each member says the version it joined in.\n")
	toolsets := host.Toolsets()
	if len(toolsets) == 0 {
		b.WriteString("\nThis release bundles no toolset.\n")
	}
	for _, ts := range toolsets {
		fmt.Fprintf(&b, "\n### `@%s`\n\n| operation | since |\n|---|---|\n", ts.Name)
		for _, op := range ts.Operations {
			fmt.Fprintf(&b, "| `%s` | %s |\n", op.Name, op.Since)
		}
	}
	b.WriteString("\n## Playbooks\n\n")
	b.WriteString("The daemon writes each as `skills/<name>/SKILL.md` under its playbook\ndirectory, beside the operator's own.\n")
	playbooks := host.Playbooks()
	if len(playbooks) == 0 {
		b.WriteString("\nThis release bundles no playbook.\n")
	}
	for _, p := range playbooks {
		ops, _ := extension.PlaybookOperations(p.Markdown)
		fmt.Fprintf(&b, "\n### `%s`\n\nDeclares: `%s`.\n", p.Name, strings.Join(ops, "`, `"))
	}
	return b.Bytes()
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The renderer lists an extension's operations, toolsets and playbooks.
func TestRenderReferenceListsExtensions(t *testing.T) {
	host := toolbelt.NewHost(ReleaseRegistry())
	err := host.Register(extension.Registration{Name: "acme",
		Operations: []extension.Operation{{Name: "acme.read", Summary: "Read a thing.", InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}}}`),
			Handler: func(_ context.Context, _ extension.Authority, _ json.RawMessage) (json.RawMessage, error) {
				return nil, nil
			}}},
		Toolsets:  []extension.Toolset{{Name: "acme.author", Operations: []extension.ToolsetOperation{{Name: "acme.read", Since: "1.2.0"}}}},
		Playbooks: []extension.Playbook{{Name: "reading", Markdown: "---\noperations: [acme.read, emit]\n---\n"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := string(renderReference(host))
	for _, want := range []string{"### `acme.read`\n\nServed by the `acme` extension.\n\nRead a thing.", `"id": {`,
		"### `@acme.author`", "| `acme.read` | 1.2.0 |", "### `reading`\n\nDeclares: `acme.read`, `emit`.", "### `emit`\n\nA builtin"} {
		if !strings.Contains(got, want) {
			t.Errorf("the reference lacks %q:\n%s", want, got)
		}
	}
}
