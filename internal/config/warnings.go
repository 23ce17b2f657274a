package config

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/open-conduit/open-conduit/extension"
)

// Warning codes. A warning never fails a configuration.
const (
	// WarnPlaybookNotGranted: a binding's playbook uses operations the
	// binding (with its grants) or its scope does not grant, so its agent
	// would be refused them at run time.
	WarnPlaybookNotGranted = "playbook_not_granted"
	// WarnToolsetSpelledOut: an operation list names every operation of an
	// earlier version of a toolset one by one, but not the toolset, so it
	// lacks what the toolset gained since.
	WarnToolsetSpelledOut = "toolset_spelled_out"
	// WarnIngressNotLoopback: the webhook listener listens beyond
	// loopback (allowed by allow_non_loopback).
	WarnIngressNotLoopback = "ingress_not_loopback"
)

// IngressWarnings reports a webhook listener beyond loopback.
func IngressWarnings(s *Snapshot) []Warning {
	in := s.Ingress()
	if in.Listen == "" || extension.LoopbackListen(in.Listen) {
		return nil
	}
	return []Warning{{Pointer: "/ingress/listen", Code: WarnIngressNotLoopback,
		Message: "the webhook listener listens beyond loopback, so any machine that reaches this address can send it deliveries (each still needs its ingress's signature); prefer 127.0.0.1 behind a reverse proxy or tunnel"}}
}

// GrantWarnings reports, for every active scope of a snapshot, the grants
// that probably do not say what the operator meant. It uses only names the
// registry knows, so no configured value but those names reaches a message.
func GrantWarnings(s *Snapshot, reg *Registry) []Warning {
	out := []Warning{}
	for _, sc := range s.Scopes() {
		if !sc.Active {
			continue
		}
		written := s.config.Scopes[sc.ID]
		out = append(out, spelledOut(reg, scopePath(sc.ID, keyStep("authorization"), keyStep("operations")), written.Authorization.Operations)...)
		for _, bid := range sortedKeys(sc.Bindings) {
			b := sc.Bindings[bid]
			wb := written.Bindings[bid]
			base := scopePath(sc.ID, keyStep("bindings"), keyStep(bid))
			out = append(out, playbookGap(b, append(slices.Clone(base), keyStep("playbook")))...)
			out = append(out, spelledOut(reg, append(slices.Clone(base), keyStep("operations")), wb.Operations)...)
			for _, gid := range sortedKeys(wb.Grants) {
				out = append(out, spelledOut(reg, append(slices.Clone(base), keyStep("grants"), keyStep(gid), keyStep("operations")), wb.Grants[gid].Operations)...)
			}
		}
	}
	return out
}

func playbookGap(b *EffectiveBinding, path []step) []Warning {
	if b.Playbook == "" || len(b.PlaybookOperations) == 0 {
		return nil
	}
	have := map[string]bool{}
	for _, op := range b.Operations {
		have[op] = true
	}
	for _, ops := range b.Grants {
		for _, op := range ops {
			have[op] = true
		}
	}
	var missing []string
	for _, op := range b.PlaybookOperations {
		if !have[op] && !slices.Contains(missing, op) {
			missing = append(missing, op)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return []Warning{{Pointer: pointer(path), Code: WarnPlaybookNotGranted,
		Message: "the binding's playbook " + b.Playbook + " uses operations that neither the binding, its grants nor its scope grant, so its agent would be refused them: " +
			strings.Join(missing, ", ") + ". Grant them to the binding (and its scope), or choose another playbook"}}
}

// spelledOut finds the toolsets whose members as of an earlier version the
// list names one by one, without the toolset itself.
func spelledOut(reg *Registry, path []step, list []string) []Warning {
	explicit := map[string]bool{}
	named := map[string]bool{}
	for _, raw := range list {
		e, ok := parseEntry(raw)
		if !ok || e.deny {
			continue
		}
		if e.toolset {
			named[e.name] = true
		} else {
			explicit[e.name] = true
		}
	}
	var out []Warning
	for _, ts := range reg.Toolsets() {
		if named[ts.Name] || len(ts.Operations) == 0 {
			continue
		}
		var versions []string
		for _, op := range ts.Operations {
			if !slices.Contains(versions, op.Since) {
				versions = append(versions, op.Since)
			}
		}
		slices.SortFunc(versions, compareVersions)
		// The latest earlier version whose members the list names in full.
		covered := ""
		for _, v := range versions[:len(versions)-1] {
			all := true
			for _, op := range ts.Operations {
				if compareVersions(op.Since, v) <= 0 && !explicit[op.Name] {
					all = false
					break
				}
			}
			if all {
				covered = v
			}
		}
		if covered == "" {
			continue
		}
		var missing []string
		for _, op := range ts.Operations {
			if !explicit[op.Name] {
				missing = append(missing, op.Name)
			}
		}
		if len(missing) == 0 {
			continue
		}
		out = append(out, Warning{Pointer: pointer(path), Code: WarnToolsetSpelledOut,
			Message: "the list names every operation of toolset " + ts.Name + " as of " + covered +
				" one by one but not the toolset, so it lacks what the toolset gained since: " + strings.Join(missing, ", ") +
				". Grant the toolset instead: open-conduit config set " + pointer(path) + " '" + withToolset(list, ts.Name, ts.Names()) + "'"})
	}
	return out
}

// withToolset returns list as JSON with the toolset's members replaced by
// the toolset, at the place of the first of them.
func withToolset(list []string, toolset string, members []string) string {
	var out []string
	placed := false
	for _, raw := range list {
		if slices.Contains(members, raw) {
			if !placed {
				out = append(out, "@"+toolset)
				placed = true
			}
			continue
		}
		out = append(out, raw)
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// compareVersions orders release versions such as 1.8.0 or v1.10: numeric
// parts numerically, others as text, a missing or empty part as 0.
func compareVersions(a, b string) int {
	as := strings.Split(strings.TrimPrefix(a, "v"), ".")
	bs := strings.Split(strings.TrimPrefix(b, "v"), ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		x, y := "0", "0"
		if i < len(as) {
			x = as[i]
		}
		if i < len(bs) {
			y = bs[i]
		}
		if x == "" {
			x = "0"
		}
		if y == "" {
			y = "0"
		}
		xi, xerr := strconv.Atoi(x)
		yi, yerr := strconv.Atoi(y)
		switch {
		case xerr == nil && yerr == nil:
			if xi != yi {
				if xi < yi {
					return -1
				}
				return 1
			}
		case x != y:
			return strings.Compare(x, y)
		}
	}
	return 0
}
