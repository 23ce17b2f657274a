package daemon

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/runs"
)

// A run directory an earlier daemon left for an execution storage does
// not know is swept at start.
func TestStartSweepsRunDirectoriesOfUnknownExecutions(t *testing.T) {
	state := shortDir(t)
	const ghost = "exe_ghost"
	dir := filepath.Join(state, "runs", runs.Key(ghost))
	if err := os.MkdirAll(filepath.Join(dir, "token"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "execution"), []byte(ghost), 0o600); err != nil {
		t.Fatal(err)
	}
	r := start(t, state)
	if exists(dir) {
		t.Fatalf("the run directory of an unknown execution survived the start:\n%s", r.logs)
	}
	if !strings.Contains(r.logs.String(), `"msg":"run directory removed"`) {
		t.Errorf("the removal was not logged:\n%s", r.logs)
	}
}

func TestLogFormats(t *testing.T) {
	var b bytes.Buffer
	l, err := newLogger(&b, LogJSON, "")
	if err != nil {
		t.Fatal(err)
	}
	l.Info("hello", "k", "v")
	var rec map[string]any
	if err := json.Unmarshal(b.Bytes(), &rec); err != nil || rec["msg"] != "hello" || rec["k"] != "v" {
		t.Fatalf("json log %q: %v", b.String(), err)
	}
	b.Reset()
	if l, err = newLogger(&b, "", ""); err != nil {
		t.Fatal(err)
	}
	l.Info("hello", "k", "v")
	if !strings.Contains(b.String(), "msg=hello k=v") {
		t.Fatalf("text log %q", b.String())
	}
	if _, err := newLogger(&b, "xml", ""); err == nil {
		t.Fatal("an unknown format was accepted")
	}
}

func TestLogLevels(t *testing.T) {
	for _, c := range []struct {
		level string
		shown []string
	}{
		{"debug", []string{"d", "i", "w", "e"}},
		{"", []string{"i", "w", "e"}},
		{"info", []string{"i", "w", "e"}},
		{"warn", []string{"w", "e"}},
		{"error", []string{"e"}},
	} {
		var b bytes.Buffer
		l, err := newLogger(&b, LogText, c.level)
		if err != nil {
			t.Fatal(err)
		}
		l.Debug("d")
		l.Info("i")
		l.Warn("w")
		l.Error("e")
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
			_, msg, _ := strings.Cut(line, "msg=")
			got = append(got, msg)
		}
		if strings.Join(got, ",") != strings.Join(c.shown, ",") {
			t.Errorf("level %q logged %v, want %v", c.level, got, c.shown)
		}
	}
	if _, err := newLogger(io.Discard, LogText, "verbose"); err == nil {
		t.Fatal("an unknown level was accepted")
	}
}
