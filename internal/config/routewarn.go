package config

import "strings"

// WarnRouteNeverFires: a route's match names an event that no source can
// ever produce, so the route never starts, queues or drops anything.
const WarnRouteNeverFires = "route_never_fires"

// routedCore are the core.* events that reach routes, each with the one
// source that produces it: the host's core.work.finished and an operator's
// default wake. Every other core type is bound to its Work and never
// routed (core.work.created, the control events, core.action), and no
// operator, execution or ingress may send a core type.
var routedCore = map[string]string{
	"core.work.finished": "core.host",
	"core.manual.wake":   "core.manual",
}

// canFire reports whether some source can produce an Event that m
// matches and that is routed.
func canFire(m Match) bool {
	if strings.HasPrefix(m.Type, "core.") {
		for typ, src := range routedCore {
			if m.Matches(typ, src) {
				return true
			}
		}
		return false
	}
	// A type of its own comes from an operator (core.manual), an execution
	// or an ingress; the host's other sources never send one.
	return m.Source == "" || m.Source == "core.manual" || !strings.HasPrefix(m.Source, "core.")
}

// RouteWarnings reports every route of an active scope whose match no
// source can ever produce. Its message names no configured value: the
// pointer says which route.
func RouteWarnings(s *Snapshot) []Warning {
	out := []Warning{}
	for _, sc := range s.Scopes() {
		if !sc.Active {
			continue
		}
		for i, r := range s.config.Scopes[sc.ID].Routes {
			if canFire(r.Match) {
				continue
			}
			out = append(out, Warning{Pointer: pointer(scopePath(sc.ID, keyStep("routes"), idxStep(i), keyStep("match"))), Code: WarnRouteNeverFires,
				Message: "no source ever sends an event this match selects, so the route never fires: operators, executions and ingresses cannot send core.* types, " +
					"and the host routes only core.work.finished (from core.host) and core.manual.wake (from core.manual). " +
					"Match a type of your own instead, for example {\"type\": \"deploy.*\", \"source\": \"core.manual\"} for an operator's open-conduit emit deploy.run"})
		}
	}
	return out
}
