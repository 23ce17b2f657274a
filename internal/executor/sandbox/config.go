package sandbox

import (
	"path/filepath"
	"strconv"
	"strings"

	"github.com/open-conduit/open-conduit/internal/executor"
)

// Config is the `sandbox` member of an executor config:
//
//	"sandbox": {"enabled": true, "read_only": ["/opt/agents"]}
//
// It is an object so that later members can join it.
type Config struct {
	// Enabled: the execution runs inside a sandbox, and fails rather than
	// running without one.
	Enabled bool
	// ReadOnly are further host directories or files mounted read-only at
	// their own paths (a program installed outside the system's
	// directories, for example).
	ReadOnly []string
}

// MaxReadOnly bounds the read_only list, and maxPathBytes each entry.
const (
	MaxReadOnly  = 32
	maxPathBytes = 4096
)

// Codes of sandbox config problems (the configuration's diagnostic codes).
const (
	codeDuplicateKey = "duplicate_key"
	codeUnknownField = "unknown_field"
	codeMissingField = "missing_field"
	codeInvalidValue = "invalid_value"
	codeTooMany      = "too_many"
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
		case "read_only":
			cfg.ReadOnly = parseReadOnly(w, mp)
		default:
			w.Add(mp, codeUnknownField, "remove it; the sandbox knows enabled and read_only")
			w.Skip()
		}
	}
	w.End()
	if !seen["enabled"] {
		w.Add(ptr+"/enabled", codeMissingField, `say whether the execution runs sandboxed, e.g. "enabled": true`)
	}
	return cfg
}

// parseReadOnly reads the read_only list: absolute, clean paths, each
// once, at most MaxReadOnly. Its problems never quote a path.
func parseReadOnly(w *executor.ConfigWalker, ptr string) []string {
	if !w.Expect(ptr, '[', `give a list of absolute paths, e.g. ["/opt/agents"]`) {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for i := 0; w.Dec.PeekKind() != ']'; i++ {
		ip := ptr + "/" + strconv.Itoa(i)
		if w.Dec.PeekKind() != '"' {
			w.Add(ip, executor.CodeWrongType, "give each entry as a string")
			w.Skip()
			continue
		}
		p := w.ReadString()
		switch {
		case i == MaxReadOnly:
			w.Add(ptr, codeTooMany, "mount at most "+strconv.Itoa(MaxReadOnly)+" paths read-only; mount a common parent instead")
		case i > MaxReadOnly:
		case len(p) > maxPathBytes || !filepath.IsAbs(p) || filepath.Clean(p) != p || strings.IndexByte(p, 0) >= 0:
			w.Add(ip, codeInvalidValue, "give an absolute, clean path (no . or .. parts, no trailing slash)")
		case p == "/":
			w.Add(ip, codeInvalidValue, "mount a directory below the root; the system's directories are already mounted read-only")
		case seen[p]:
			w.Add(ip, codeInvalidValue, "give each path once")
		default:
			seen[p] = true
			out = append(out, p)
		}
	}
	w.End()
	return out
}
