package sandbox

import (
	"github.com/open-conduit/open-conduit/internal/executor"
)

// Config is the `sandbox` member of an executor config:
//
//	"sandbox": {"enabled": true}
//
// It is an object so that later members (an egress allowlist, extra
// mounts) can join it.
type Config struct {
	// Enabled: the execution runs inside a sandbox, and fails rather than
	// running without one.
	Enabled bool
}

// Codes of sandbox config problems (the configuration's diagnostic codes).
const (
	codeDuplicateKey = "duplicate_key"
	codeUnknownField = "unknown_field"
	codeMissingField = "missing_field"
)

// Parse reads the `sandbox` member at ptr with w, recording every problem
// on w. def is what the executor does when the config has no `sandbox`
// member; the member itself must say `enabled`.
func Parse(w *executor.ConfigWalker, ptr string, def bool) Config {
	cfg := Config{Enabled: def}
	const remedy = `give the sandbox as an object, e.g. {"enabled": true}`
	if !w.Expect(ptr, '{', remedy) {
		return cfg
	}
	seen := map[string]bool{}
	for w.Dec.PeekKind() == '"' {
		name := w.ReadString()
		mp := ptr + "/" + executor.EscapePointer(name)
		if seen[name] {
			w.Add(mp, codeDuplicateKey, "give each member once")
			w.Skip()
			continue
		}
		seen[name] = true
		switch name {
		case "enabled":
			switch w.Dec.PeekKind() {
			case 't', 'f':
				tok, _ := w.Dec.ReadToken()
				cfg.Enabled = tok.Bool()
			case 'n':
				w.Add(mp, executor.CodeNullValue, "say true or false")
				w.Skip()
			default:
				w.Add(mp, executor.CodeWrongType, "say true or false")
				w.Skip()
			}
		default:
			w.Add(mp, codeUnknownField, "remove it; the sandbox knows enabled")
			w.Skip()
		}
	}
	w.End()
	if !seen["enabled"] {
		w.Add(ptr+"/enabled", codeMissingField, `say whether the execution runs sandboxed, e.g. "enabled": true`)
	}
	return cfg
}
