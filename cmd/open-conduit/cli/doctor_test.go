package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/doctor"
)

// answeringKeyring answers every question "not found": a keyring that
// can be asked.
type answeringKeyring struct{}

func (answeringKeyring) Get(string, string) (string, error) { return "", config.ErrKeyringNotFound }

// doctor's exit status is 1 exactly when a finding is an error, 2 for a
// wrong command line; --json is the report.
func TestDoctorCommand(t *testing.T) {
	old := doctorKeyring
	doctorKeyring = answeringKeyring{}
	t.Cleanup(func() { doctorKeyring = old })
	t.Setenv(EnvEndpoint, "")
	t.Setenv(EnvTokenFile, "")
	root, err := os.MkdirTemp("", "ocdc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	state := filepath.Join(root, "s")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}

	code, out, errs := run(t, "doctor", "--state", state)
	if code != ExitOK || !strings.Contains(out, "ok       state_dir_ok: ") || !strings.Contains(out, "daemon_not_running") || !strings.Contains(out, "\ndoctor: ok: 0 errors, ") {
		t.Fatalf("doctor on a fresh state directory: %d\n%s%s", code, out, errs)
	}

	if err := os.Chmod(state, 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, _ = run(t, "doctor", "--state", state, "--offline", "--json")
	var rep doctor.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != ExitFailed || rep.OK {
		t.Fatalf("doctor --json on an open state directory: %d %q (%v)", code, out, err)
	}
	var mode *doctor.Finding
	for i, f := range rep.Findings {
		if f.Code == "state_dir_mode" {
			mode = &rep.Findings[i]
		}
		if f.Code == "daemon_not_running" {
			t.Errorf("--offline asked the daemon: %+v", f)
		}
	}
	if mode == nil || mode.Severity != doctor.SeverityError || mode.Fix != "chmod 700 "+state {
		t.Fatalf("state_dir_mode finding %+v in %s", mode, out)
	}
	var raw map[string][]map[string]any
	json.Unmarshal([]byte(out), &raw)
	for _, f := range raw["findings"] {
		if len(f) != 4 || f["severity"] == nil || f["code"] == nil || f["message"] == nil || f["fix"] == nil {
			t.Errorf("finding %v is not {severity, code, message, fix}", f)
		}
	}

	code, out, _ = run(t, "doctor", "--state", state, "--offline")
	if code != ExitFailed || !strings.Contains(out, "error    state_dir_mode: ") || !strings.Contains(out, "         fix: chmod 700 "+state+"\n") || !strings.Contains(out, "doctor: failed: 1 error, ") {
		t.Fatalf("doctor text on an open state directory: %d\n%s", code, out)
	}

	for _, args := range [][]string{{"doctor", "extra"}, {"doctor", "--no-such-flag"}} {
		if code, _, errs := run(t, args...); code != ExitUsage || errs == "" {
			t.Errorf("%v: exit %d (%q), want %d", args, code, errs, ExitUsage)
		}
	}
}
