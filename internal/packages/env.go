package packages

import (
	"slices"
	"strings"
)

// InheritedEnv names the variables of the daemon's environment a package's
// process inherits: the program search path, the home directory, the
// locale, the time zone and the temporary directory, nothing else (the
// daemon's environment may hold credentials).
var InheritedEnv = []string{"PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"}

// ProcessEnv is a package process's environment: of daemon (the daemon's
// environment, "KEY=value"), the variables InheritedEnv names, in daemon's
// order, then run's literal variables in name order, which win over an
// inherited one of the same name. Every name appears once.
func ProcessEnv(daemon []string, run Run) []string {
	env := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := env[k]; !ok {
			order = append(order, k)
		}
		env[k] = v
	}
	for _, kv := range daemon {
		if k, v, ok := strings.Cut(kv, "="); ok && slices.Contains(InheritedEnv, k) {
			set(k, v)
		}
	}
	keys := make([]string, 0, len(run.Env))
	for k := range run.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		set(k, run.Env[k])
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+env[k])
	}
	return out
}
