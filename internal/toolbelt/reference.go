package toolbelt

import (
	"encoding/json"
	"slices"
	"sort"

	"github.com/open-conduit/open-conduit/extension"
)

// Operations describes every operation a toolbelt built on the host
// serves, the builtins and every registration's, sorted by name: what the
// operations reference (docs/operations.md) lists.
func (h *Host) Operations() []extension.OperationInfo {
	out := make([]extension.OperationInfo, 0, len(builtinInfo))
	for _, b := range builtinInfo {
		out = append(out, b)
	}
	h.mu.RLock()
	for name, r := range h.ops {
		out = append(out, describe(name, r.op))
	}
	h.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Toolsets returns every registration's toolsets, sorted by name.
func (h *Host) Toolsets() []extension.Toolset {
	h.mu.RLock()
	var out []extension.Toolset
	for _, r := range h.regs {
		for _, ts := range r.Toolsets {
			ts.Operations = slices.Clone(ts.Operations)
			out = append(out, ts)
		}
	}
	h.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Playbooks returns every registration's playbooks, sorted by name.
func (h *Host) Playbooks() []extension.Playbook {
	h.mu.RLock()
	var out []extension.Playbook
	for _, r := range h.regs {
		out = append(out, r.Playbooks...)
	}
	h.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// describe is what an agent is told about a registered operation.
func describe(name string, op extension.Operation) extension.OperationInfo {
	schema := op.InputSchema
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	caps := slices.Clone(op.Capabilities)
	if caps == nil {
		caps = []string{}
	}
	return extension.OperationInfo{Name: name, Summary: op.Summary, InputSchema: schema, Guidance: op.Guidance, Capabilities: caps}
}
