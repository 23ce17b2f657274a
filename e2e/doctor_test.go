package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/client"
)

// doctorReport is the shape of open-conduit doctor --json.
type doctorReport struct {
	Findings []struct {
		Severity string `json:"severity"`
		Code     string `json:"code"`
		Message  string `json:"message"`
		Fix      string `json:"fix"`
	} `json:"findings"`
	OK bool `json:"ok"`
}

// doctor runs open-conduit doctor --json with args and returns its exit
// status, its report (with every finding's shape checked) and the raw
// output.
func (e *env) doctor(args ...string) (int, doctorReport, string) {
	e.t.Helper()
	code, out, errs := e.cli(append([]string{"doctor", "--json"}, args...)...)
	var rep doctorReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		e.t.Fatalf("doctor --json printed %q (stderr %q): %v", out, errs, err)
	}
	errors := 0
	for _, f := range rep.Findings {
		if f.Code == "" || f.Message == "" {
			e.t.Errorf("finding without a code or message: %+v", f)
		}
		switch f.Severity {
		case "error":
			errors++
			fallthrough
		case "warning":
			if f.Fix == "" {
				e.t.Errorf("finding %+v says nothing about how to fix it", f)
			}
		case "info", "ok":
		default:
			e.t.Errorf("finding %+v has an unknown severity", f)
		}
	}
	if rep.OK != (errors == 0) || (code == 0) != rep.OK || code > 1 {
		e.t.Fatalf("doctor exited %d with ok %v and %d errors:\n%s", code, rep.OK, errors, out)
	}
	return code, rep, out
}

// findingOf returns the one finding with code, failing when there is
// none or more, or when its severity is not sev.
func findingOf(t *testing.T, rep doctorReport, code, sev string) (message, fix string) {
	t.Helper()
	n := 0
	for _, f := range rep.Findings {
		if f.Code == code {
			n++
			message, fix = f.Message, f.Fix
			if f.Severity != sev {
				t.Errorf("finding %s is %s, want %s: %s", code, f.Severity, sev, f.Message)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d findings %s, want 1: %+v", n, code, rep.Findings)
	}
	return message, fix
}

// Doctor on a healthy daemon's state directory finds no error and no
// warning, and reports what the daemon knows.
func TestDoctorHealthy(t *testing.T) {
	e := newEnv(t)
	d := e.start()
	code, rep, out := e.doctor()
	if code != 0 {
		t.Fatalf("doctor on a healthy daemon exited %d:\n%s", code, out)
	}
	for _, f := range rep.Findings {
		if f.Severity == "error" || f.Severity == "warning" {
			// Only the machine's disk may differ from a healthy install.
			if !strings.HasPrefix(f.Code, "disk_space") {
				t.Errorf("a healthy daemon has %s %s: %s", f.Severity, f.Code, f.Message)
			}
		}
	}
	for _, code := range []string{"state_dir_ok", "token_file_ok", "management_socket_ok", "run_socket_ok", "daemon_ready", "os_binary_ok",
		"work_none_held", "config_ok", "grants_ok", "secrets_ok"} {
		findingOf(t, rep, code, "ok")
	}
	if msg, _ := findingOf(t, rep, "config_source", "info"); !strings.Contains(msg, "the daemon's active configuration (generation 1)") {
		t.Errorf("config_source: %s", msg)
	}
	if code, text, _ := e.cli("doctor"); code != 0 || !strings.Contains(text, "ok       daemon_ready: ") || !strings.Contains(text, "\ndoctor: ok: 0 errors") {
		t.Errorf("doctor's text on a healthy daemon: %d\n%s", code, text)
	}
	if d.stop() != 0 {
		t.Fatal("the daemon did not stop cleanly")
	}
}

// brokenConfig has a secret no environment sets, selected by the binding,
// a file: secret whose value is in secrets.json, and a binding whose
// playbook uses an operation it is not granted.
const brokenConfig = `{"version": 1,
  "secrets": {"deploy": "env:OC_E2E_DOCTOR_UNSET", "db": "file:db_password"},
  "scopes": {"s": {"authorization": {"operations": ["emit", "@introspection.reader"]},
    "bindings": {"b": {"executor": "shell", "config": {"command": ["true"]}, "operations": ["emit"],
      "secrets": {"TOKEN": "deploy", "DB": "db"}, "playbook": "triage"}}}}}`

const secretValue = "e2e-doctor-secret-value"

// Doctor on a deliberately broken state directory: each finding with its
// severity and fix, and exit status 1; from the daemon (held Work) and
// offline with the daemon stopped.
func TestDoctorBroken(t *testing.T) {
	e := newEnv(t)
	if err := os.MkdirAll(filepath.Join(e.state, "playbooks"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(e.state, "config.json"), []byte(brokenConfig))
	writeFile(t, filepath.Join(e.state, "secrets.json"), []byte(`{"db_password": "`+secretValue+`"}`))
	writeFile(t, filepath.Join(e.state, "playbooks", "triage.md"),
		[]byte("---\nname: triage\ndescription: triage an issue\noperations: [introspection.work]\n---\nTriage it.\n"))
	d := e.start()

	// A Work of the binding is held: its secret does not resolve.
	c := e.client()
	ctx := context.Background()
	created, err := c.CreateWork(ctx, client.CreateWorkRequest{Scope: "s", Binding: "b"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := created.Work.ID
	until(t, "the Work is held", func() bool {
		w, err := c.GetWork(ctx, id, nil)
		return err == nil && w.BlockedReason != ""
	})

	code, rep, out := e.doctor()
	if code != 1 {
		t.Fatalf("doctor exited %d, want 1:\n%s", code, out)
	}
	findingOf(t, rep, "daemon_ready", "ok")
	msg, fix := findingOf(t, rep, "work_held", "warning")
	if !strings.Contains(msg, id) || !strings.Contains(msg, "secret_unavailable") || !strings.HasSuffix(fix, "open-conduit work retry "+id) {
		t.Errorf("work_held: %s (fix %s)", msg, fix)
	}
	msg, _ = findingOf(t, rep, "secret_unresolved", "error")
	if !strings.Contains(msg, "secret deploy ") {
		t.Errorf("secret_unresolved: %s", msg)
	}
	msg, fix = findingOf(t, rep, "grant_warning", "warning")
	if !strings.Contains(msg, "playbook_not_granted") || !strings.HasPrefix(fix, `open-conduit config set /scopes/s/bindings/b/operations '["emit","introspection.work"]'`) {
		t.Errorf("grant_warning: %s (fix %s)", msg, fix)
	}
	for _, never := range []string{secretValue, "OC_E2E_DOCTOR_UNSET", "db_password"} {
		if strings.Contains(out, never) {
			t.Errorf("doctor's report holds %q:\n%s", never, out)
		}
	}
	token, err := os.ReadFile(e.tokenFile())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, strings.TrimSpace(string(token))) {
		t.Fatalf("doctor's report holds the owner's token")
	}

	if d.stop() != 0 {
		t.Fatal("the daemon did not stop cleanly")
	}

	// Offline, with the daemon stopped: a token file others may read and an
	// os that is a link into a vanished build directory.
	if err := os.Chmod(e.tokenFile(), 0o644); err != nil {
		t.Fatal(err)
	}
	osBin := filepath.Join(e.state, "bin", "os")
	if err := os.Remove(osBin); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(e.root, "go-build4242", "b001", "exe", "open-conduit"), osBin); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{nil, {"--offline"}} {
		code, rep, out := e.doctor(args...)
		if code != 1 {
			t.Fatalf("doctor %v exited %d, want 1:\n%s", args, code, out)
		}
		if msg, fix := findingOf(t, rep, "token_file_mode", "error"); !strings.Contains(msg, "0644") || fix != "chmod 600 "+e.tokenFile()+" && open-conduit auth rotate" {
			t.Errorf("token_file_mode: %s (fix %s)", msg, fix)
		}
		findingOf(t, rep, "os_binary_dangling", "error")
		findingOf(t, rep, "secret_unresolved", "error")
		findingOf(t, rep, "grant_warning", "warning")
		if args == nil {
			findingOf(t, rep, "daemon_not_running", "info")
		} else {
			findingOf(t, rep, "daemon_not_asked", "info")
		}
		if msg, _ := findingOf(t, rep, "config_source", "info"); !strings.Contains(msg, filepath.Join(e.state, "config.json")) {
			t.Errorf("offline, config.json is checked: %s", msg)
		}
		for _, f := range rep.Findings {
			if strings.HasPrefix(f.Code, "work_") {
				t.Errorf("offline doctor reports Work: %+v", f)
			}
		}
	}
	// The text output prints the fix under each finding.
	code, text, _ := e.cli("doctor", "--offline")
	if code != 1 || !strings.Contains(text, "error    token_file_mode: ") || !strings.Contains(text, "         fix: chmod 600 "+e.tokenFile()) || !strings.Contains(text, "doctor: failed: 3 errors") {
		t.Errorf("doctor's text: %d\n%s", code, text)
	}

	// Following the fixes: chmod the token file, start the daemon (which
	// installs a copy of itself as os) with the secret set, retry the Work.
	if err := os.Chmod(e.tokenFile(), 0o600); err != nil {
		t.Fatal(err)
	}
	d = e.start("OC_E2E_DOCTOR_UNSET=set")
	if code, _, errs := e.cli("work", "retry", id); code != 0 {
		t.Fatalf("work retry: %d %s", code, errs)
	}
	until(t, "the Work succeeds", func() bool {
		w, err := c.GetWork(ctx, id, nil)
		return err == nil && w.State == api.WorkSucceeded
	})
	// Doctor in the daemon's environment: only the grant warning is left,
	// and warnings do not fail.
	code, rep, out = e.cli2doctor(t, "OC_E2E_DOCTOR_UNSET=set")
	if code != 0 {
		t.Fatalf("doctor after the fixes exited %d:\n%s", code, out)
	}
	findingOf(t, rep, "os_binary_ok", "ok")
	findingOf(t, rep, "token_file_ok", "ok")
	findingOf(t, rep, "work_none_held", "ok")
	findingOf(t, rep, "secrets_ok", "ok")
	d.stop()
}

// cli2doctor runs doctor --json with extra environment.
func (e *env) cli2doctor(t *testing.T, extra ...string) (int, doctorReport, string) {
	t.Helper()
	code, out, errs := e.run(bins.openConduit, extra, "doctor", "--json")
	var rep doctorReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("doctor --json printed %q (stderr %q): %v", out, errs, err)
	}
	return code, rep, out
}

// A state directory too deep for the management socket: doctor says so
// before any daemon could start there.
func TestDoctorSocketPathTooLong(t *testing.T) {
	e := newEnv(t)
	deep := filepath.Join(e.root, strings.Repeat("d", 50), strings.Repeat("s", 50))
	if err := os.MkdirAll(deep, 0o700); err != nil {
		t.Fatal(err)
	}
	code, rep, out := e.doctor("--state", deep)
	if code != 1 {
		t.Fatalf("doctor exited %d, want 1:\n%s", code, out)
	}
	if msg, fix := findingOf(t, rep, "management_socket_too_long", "error"); !strings.Contains(msg, deep) || !strings.Contains(fix, "mv "+deep+" SHORTER_DIR") {
		t.Errorf("management_socket_too_long: %s (fix %s)", msg, fix)
	}
	findingOf(t, rep, "run_socket_fallback", "info")
	// And the daemon refuses it, as doctor said.
	if code, _, errs := e.run(bins.openConduit, nil, "daemon", "--state", deep); code != 1 || !strings.Contains(errs, "shorter state directory") {
		t.Errorf("the daemon on a too deep state directory: %d %s", code, errs)
	}
}
