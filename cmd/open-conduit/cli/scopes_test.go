package cli

import (
	"regexp"
	"strings"
	"testing"
)

// scopes pages through the list helper like every list: --limit, the
// "more:" hint with the --cursor to pass, and the same table.
func TestScopesPages(t *testing.T) {
	serveStack(t)
	more := regexp.MustCompile(`more: open-conduit scopes --cursor (\S+) `)
	code, out, errs := run(t, "scopes", "--limit", "1")
	m := more.FindStringSubmatch(errs)
	if rows := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || m == nil || len(rows) != 2 || !strings.HasPrefix(rows[0], "ID") || !strings.HasPrefix(rows[1], "setup ") {
		t.Fatalf("scopes --limit 1: %d %q %q", code, out, errs)
	}
	code, out, errs = run(t, "scopes", "--limit", "1", "--cursor", m[1])
	if rows := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || errs != "" || len(rows) != 2 || !strings.HasPrefix(rows[1], "team ") {
		t.Fatalf("second page: %d %q %q", code, out, errs)
	}
	if out := mustRun(t, 1, "scopes", "--cursor", m[1]+"x"); !strings.Contains(out, "invalid_cursor") {
		t.Errorf("altered cursor said %q", out)
	}
	if out := mustRun(t, 2, "scopes", "setup", "--limit", "1"); !strings.Contains(out, "--limit") {
		t.Errorf("paging flags with a scope ID said %q", out)
	}
}
