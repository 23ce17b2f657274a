package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The README's walk-through, with the real CLI: create Work on the default
// scope and wait for it, then read its log whole and by range, and start
// Work with an operator's Event.
func TestReadmeWalkThrough(t *testing.T) {
	e := newEnv(t)
	e.start()
	code, out, stderr := e.cli("work", "create", "--scope", "setup", "--wait")
	if code != 0 || !strings.Contains(out, "succeeded") {
		t.Fatalf("work create --wait: exit %d\n%s\n%s", code, out, stderr)
	}
	m := regexp.MustCompile(`artifacts cat (art_[a-z0-9]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("work create --wait did not say how to read the log:\n%s", out)
	}
	workID := regexp.MustCompile(`wrk_[a-z0-9]+`).FindString(out)
	code, log, stderr := e.cli("artifacts", "cat", m[1])
	if code != 0 || !strings.HasPrefix(log, "Open Conduit ran Work "+workID+" in scope setup") {
		t.Fatalf("artifacts cat: exit %d %q %q", code, log, stderr)
	}
	code, part, stderr := e.cli("artifacts", "cat", m[1], "--range", "0-63")
	if code != 0 || part != log[:64] {
		t.Fatalf("artifacts cat --range 0-63: exit %d %q %q, want %q", code, part, stderr, log[:64])
	}
	code, out, stderr = e.cli("emit", "setup.hello", "--scope", "setup")
	started := regexp.MustCompile(`Started Work (wrk_[a-z0-9]+)`).FindStringSubmatch(out)
	if code != 0 || started == nil {
		t.Fatalf("emit setup.hello: exit %d %q %q, want a started Work", code, out, stderr)
	}
	e.waitWork(started[1], "succeeded", func(w work) bool { return w.State == "succeeded" })
	// The README's daemon command needs nothing but the one binary: os is
	// the same binary, copied into the state directory (so that it lasts
	// when go run's build directory goes).
	if fi, err := os.Lstat(filepath.Join(e.state, "bin", "os")); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o755 {
		t.Fatalf("bin/os is %v (%v), want a regular file of mode 0755", fi, err)
	}
	if got, err := os.ReadFile(filepath.Join(e.state, "bin", "os")); err != nil {
		t.Fatal(err)
	} else if want, err := os.ReadFile(bins.openConduit); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("bin/os is not a copy of %s (%v)", bins.openConduit, err)
	}
}
