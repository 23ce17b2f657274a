package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/buildinfo"
)

// version and --version print the same line, needing no daemon; --json is
// the build information as an object.
func TestVersionCommand(t *testing.T) {
	t.Setenv(EnvState, t.TempDir()) // nothing there: no daemon is asked
	code, out, errs := run(t, "version")
	want := "open-conduit " + versionLine(buildinfo.Read()) + "\n"
	if code != 0 || out != want {
		t.Fatalf("version: %d %q %q, want %q", code, out, errs, want)
	}
	if code, out, _ := run(t, "--version"); code != 0 || out != want {
		t.Fatalf("--version: %d %q, want %q", code, out, want)
	}
	code, out, _ = run(t, "version", "--json")
	var got buildinfo.Info
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || got != buildinfo.Read() {
		t.Fatalf("version --json: %d %q (%v)", code, out, err)
	}
}

func TestVersionLine(t *testing.T) {
	for in, want := range map[buildinfo.Info]string{
		{Version: "(devel)"}:                                                "(devel)",
		{Version: "v0.3.0", Go: "go1.26.8"}:                                 "v0.3.0 go1.26.8",
		{Version: "(devel)", Commit: "abc", Go: "go1.26.8"}:                 "(devel) (commit abc) go1.26.8",
		{Version: "(devel)", Commit: "abc", Modified: true, Go: "go1.26.8"}: "(devel) (commit abc, modified) go1.26.8",
	} {
		if got := versionLine(in); got != want || strings.Contains(got, "  ") {
			t.Errorf("versionLine(%+v) = %q, want %q", in, got, want)
		}
	}
}
