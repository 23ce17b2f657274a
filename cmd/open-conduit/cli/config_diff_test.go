package cli

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
)

// config get prints the applyable document (its metadata on stderr), and
// it applies back as no generation; config diff says it is identical
// (exit 0), and of an edited copy shows the change and counts it (exit 1).
func TestConfigGetDiffAndApplyBack(t *testing.T) {
	serveStack(t)
	code, doc, meta := run(t, "config", "get")
	if code != 0 || !strings.Contains(meta, "generation 1, hash ") || strings.Contains(doc, "generation") || strings.Contains(doc, mgmttest.CanaryReference) {
		t.Fatalf("config get: exit %d, stdout %q, stderr %q", code, doc, meta)
	}
	var probe map[string]any
	if err := json.Unmarshal([]byte(doc), &probe); err != nil {
		t.Fatalf("config get printed no JSON document: %v", err)
	}
	got := cfgFile(t, doc)
	if out := mustRun(t, 0, "config", "diff", got); !strings.HasPrefix(out, "Identical: ") {
		t.Errorf("diff of config get's output said %q", out)
	}
	if out := mustRun(t, 0, "config", "apply", got); !strings.Contains(out, "Unchanged: generation 1") {
		t.Errorf("apply of config get's output said %q", out)
	}
	edited := strings.Replace(doc, `"b": {`, `"c": {
          "config": {"command": ["true"]},
          "executor": "shell"
        },
        "b": {`, 1)
	edited = strings.Replace(edited, `"routes": [`, `"routes": [
        {"binding": "shell", "id": "pushes", "match": {"type": "push.*"}},`, 1)
	if edited == doc {
		t.Fatalf("the edit changed nothing in %s", doc)
	}
	f := cfgFile(t, edited)
	code, out, errs := run(t, "config", "diff", f)
	if code != ExitFailed || !strings.Contains(out, "--- active (generation 1)") || !strings.Contains(out, "+++ "+f) ||
		!strings.Contains(out, `+        "c": {`) || !strings.Contains(out, "@@ -") ||
		!strings.Contains(out, "scopes: 0 added, 0 removed, 2 changed; bindings: 1 added, 0 removed, 0 changed; routes: 1 added, 0 removed, 0 changed") {
		t.Fatalf("diff of an edited copy: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, _ = run(t, "config", "diff", f, "--json")
	var d configDiff
	if err := json.Unmarshal([]byte(out), &d); err != nil || code != ExitFailed || d.Identical || d.Generation != 1 ||
		!hasChange(d, "/scopes/team/bindings/c", "binding", "added") || !hasChange(d, "/scopes/setup/routes/pushes", "route", "added") {
		t.Errorf("diff --json: exit %d %+v %v", code, d, err)
	}
	// A secret's reference is compared, never shown.
	code, out, _ = run(t, "config", "diff", cfgFile(t, strings.Replace(doc, "env:<redacted>", "env:OC_OTHER_VARIABLE", 1)))
	if code != ExitFailed || !strings.Contains(out, "secret references differ") || strings.Contains(out, "OC_OTHER_VARIABLE") ||
		!strings.Contains(out, "other members: 0 added, 0 removed, 1 changed") {
		t.Errorf("diff of another secret reference: exit %d %q", code, out)
	}
	// Applied, the edit is the active configuration.
	mustRun(t, 0, "config", "apply", f)
	if out := mustRun(t, 0, "config", "diff", f, "--json"); !strings.Contains(out, `"identical":true`) || !strings.Contains(out, `"changes":[]`) {
		t.Errorf("diff after the apply: %s", out)
	}
	// An invalid file gives apply's problems; a missing argument is usage.
	if code, out, _ := run(t, "config", "diff", cfgFile(t, cfgInvalid)); code != ExitFailed || !strings.Contains(out, "unknown_field") {
		t.Errorf("diff of an invalid file: exit %d %q", code, out)
	}
	if code, _, _ := run(t, "config", "diff"); code != ExitUsage {
		t.Errorf("diff without FILE: exit %d", code)
	}
}

func hasChange(d configDiff, ptr, kind, change string) bool {
	for _, c := range d.Changes {
		if c == (diffChange{Pointer: ptr, Kind: kind, Change: change}) {
			return true
		}
	}
	return false
}

// A line diff's kept and removed lines are the old text, its kept and
// added lines the new one, and it is no longer than deleting and adding
// what differs.
func TestDiffLinesRebuildsBothSides(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"a", "b", "c", "d"}
	for range 500 {
		a := make([]string, r.IntN(12))
		b := make([]string, r.IntN(12))
		for i := range a {
			a[i] = words[r.IntN(len(words))]
		}
		for i := range b {
			b[i] = words[r.IntN(len(words))]
		}
		var old, new []string
		changes := 0
		for _, e := range diffLines(a, b) {
			if e.op != '+' {
				old = append(old, e.text)
			}
			if e.op != '-' {
				new = append(new, e.text)
			}
			if e.op != ' ' {
				changes++
			}
		}
		if strings.Join(old, ",") != strings.Join(a, ",") || strings.Join(new, ",") != strings.Join(b, ",") || changes > len(a)+len(b) {
			t.Fatalf("diff of %v and %v rebuilt %v and %v", a, b, old, new)
		}
	}
}
