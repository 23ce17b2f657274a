package mcppkg

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/open-conduit/open-conduit/extension"
)

// Bounds of what a tool's description becomes.
const (
	maxSummary  = 200       // bytes of an operation's summary
	maxGuidance = 16 << 10  // bytes of an operation's guidance
	maxMessage  = 500       // bytes of a refusal's message
	maxSchema   = 256 << 10 // bytes of a tool's input schema
)

// Skipped is a tool of the server that has no operation, and why.
type Skipped struct {
	// Tool is the server's tool name, quoted and bounded (it is the
	// server's text, so it is shown only through %q).
	Tool string
	// Reason is a short sentence of the host's own.
	Reason string
}

// OperationSuffix maps an MCP tool name to the suffix of its operation
// name <package>.<suffix>: ASCII capitals become lower-case and '.' becomes
// '_'; the result must be one segment of the operation-name rule (a
// lower-case letter, then lower-case letters, digits, '-' or '_'). A name
// that does not map reports false: its tool is skipped, never renamed
// further.
func OperationSuffix(tool string) (string, bool) {
	if tool == "" || len(tool) > 128 {
		return "", false
	}
	var b strings.Builder
	for _, r := range tool {
		switch {
		case r >= 'A' && r <= 'Z':
			r += 'a' - 'A'
		case r == '.':
			r = '_'
		}
		b.WriteRune(r)
	}
	s := b.String()
	if strings.Contains(s, ".") || extension.OperationName(s) != nil {
		return "", false
	}
	return s, true
}

// tool is one registered tool: the server's name and its operation.
type tool struct {
	name     string // the server's tool name, which tools/call uses
	op       string // <package>.<suffix>
	readOnly bool
	schema   json.RawMessage
	summary  string
	guidance string
}

// mapTools turns the server's tool list into the tools to register, in
// operation-name order, and the tools skipped: names that do not map,
// names that map onto the same operation (every one of them is skipped, so
// none takes another's place), and input schemas that are not objects.
func mapTools(pkg string, listed []*mcp.Tool) ([]tool, []Skipped) {
	var skipped []Skipped
	byOp := map[string][]*mcp.Tool{}
	for _, t := range listed {
		suffix, ok := OperationSuffix(t.Name)
		if !ok {
			skipped = append(skipped, Skipped{Tool: quoted(t.Name), Reason: "its name does not map to an operation name (letters, digits, '-', '_' and '.', starting with a letter)"})
			continue
		}
		op := pkg + "." + suffix
		byOp[op] = append(byOp[op], t)
	}
	var out []tool
	for op, ts := range byOp {
		if len(ts) > 1 {
			for _, t := range ts {
				skipped = append(skipped, Skipped{Tool: quoted(t.Name), Reason: fmt.Sprintf("%d tools map to the operation name %s, so none of them is registered", len(ts), op)})
			}
			continue
		}
		t := ts[0]
		schema, err := inputSchema(t.InputSchema)
		if err != nil {
			skipped = append(skipped, Skipped{Tool: quoted(t.Name), Reason: err.Error()})
			continue
		}
		out = append(out, tool{
			name:     t.Name,
			op:       op,
			readOnly: t.Annotations != nil && t.Annotations.ReadOnlyHint,
			schema:   schema,
			summary:  summaryOf(pkg, t),
			guidance: bounded(strings.TrimSpace(t.Description), maxGuidance),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].op < out[j].op })
	sort.Slice(skipped, func(i, j int) bool { return skipped[i].Tool < skipped[j].Tool })
	return out, skipped
}

// inputSchema is a tool's input schema as an operation's: a JSON object
// whose type, when given, is "object".
func inputSchema(v any) (json.RawMessage, error) {
	if v == nil {
		return json.RawMessage(`{"type":"object"}`), nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("its input schema does not encode as JSON")
	}
	if len(raw) > maxSchema {
		return nil, fmt.Errorf("its input schema is larger than %d bytes", maxSchema)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("its input schema is not a JSON object")
	}
	if t, ok := m["type"]; ok && t != "object" {
		return nil, fmt.Errorf(`its input schema's type is not "object"`)
	}
	return raw, nil
}

// summaryOf is the first sentence of the tool's description (else its
// title), bounded; a tool with neither gets a sentence of the host's own.
func summaryOf(pkg string, t *mcp.Tool) string {
	s := firstSentence(t.Description)
	if s == "" {
		s = firstSentence(t.Title)
	}
	if s == "" && t.Annotations != nil {
		s = firstSentence(t.Annotations.Title)
	}
	if s == "" {
		return fmt.Sprintf("Call the tool %s of the MCP server %s.", quoted(t.Name), pkg)
	}
	return s
}

// firstSentence is the text up to the first sentence end (". ", a blank
// line or a line end), on one line, bounded to maxSummary bytes.
func firstSentence(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, "\n"); i >= 0 {
		s = s[:i]
	}
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i+1]
	}
	return bounded(strings.TrimSpace(s), maxSummary)
}

// bounded cuts s to at most n bytes on a rune boundary (ending in "…" when
// cut), with invalid UTF-8 and control characters other than line ends
// and tabs replaced.
func bounded(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) && r != '\n' && r != '\t' {
			return '\uFFFD'
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// quoted is a server's name as the host shows it: quoted and bounded.
func quoted(s string) string {
	if len(s) > 64 {
		s = bounded(s, 64)
	}
	return fmt.Sprintf("%q", s)
}

// operations are the registration's operations, one per tool, each served
// by handler(t).
func operations(tools []tool, handler func(tool) extension.Handler) []extension.Operation {
	out := make([]extension.Operation, 0, len(tools))
	for _, t := range tools {
		out = append(out, extension.Operation{
			Name:        t.op,
			Summary:     t.summary,
			InputSchema: t.schema,
			Guidance:    t.guidance,
			Handler:     handler(t),
		})
	}
	return out
}

// toolsets are <pkg>.read (the tools annotated read-only, possibly none)
// and <pkg>.all (every registered tool), each member since version.
func toolsets(pkg, version string, tools []tool) []extension.Toolset {
	read := extension.Toolset{Name: pkg + ".read", Operations: []extension.ToolsetOperation{}}
	all := extension.Toolset{Name: pkg + ".all", Operations: []extension.ToolsetOperation{}}
	for _, t := range tools {
		m := extension.ToolsetOperation{Name: t.op, Since: version}
		if t.readOnly {
			read.Operations = append(read.Operations, m)
		}
		all.Operations = append(all.Operations, m)
	}
	return []extension.Toolset{read, all}
}
