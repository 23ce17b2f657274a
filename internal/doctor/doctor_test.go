package doctor_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/bootstrap"
	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/daemon"
	"github.com/open-conduit/open-conduit/internal/doctor"
	"github.com/open-conduit/open-conduit/internal/runs"
)

// ownerToken is the text of the owner's token file in every test state
// directory; no finding may ever hold it.
const ownerToken = "T0KEN-TEXT-never-shown_0123456789abcdefghijk"

// newState makes a healthy state directory, as a daemon that ran once
// leaves it: owner-only, the owner's token, storage, an executable os.
func newState(t *testing.T) string {
	t.Helper()
	root, err := os.MkdirTemp("", "ocd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	state := filepath.Join(root, "s")
	mkdir(t, state)
	mkdir(t, filepath.Join(state, "private"))
	mkdir(t, filepath.Join(state, "bin"))
	write(t, filepath.Join(state, "private", "operator.token"), ownerToken+"\n", 0o600)
	write(t, filepath.Join(state, "coordination.db"), "", 0o600)
	write(t, filepath.Join(state, "bin", "os"), "#!/bin/sh\n", 0o755)
	return state
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// fakeKeyring is a keyring behind config.Keyring: items by
// "service/user", or err for every question; block never answers.
type fakeKeyring struct {
	items map[string]string
	err   error
	block chan struct{}
}

func (k *fakeKeyring) Get(service, user string) (string, error) {
	if k.block != nil {
		<-k.block
	}
	if k.err != nil {
		return "", k.err
	}
	if v, ok := k.items[service+"/"+user]; ok {
		return v, nil
	}
	return "", config.ErrKeyringNotFound
}

// never is a timer that never fires: no test waits out a deadline.
func never(time.Duration) <-chan time.Time { return make(chan time.Time) }

// options are the checks' parts for a state directory: a fresh release
// registry, a keyring that answers, plenty of disk, bwrap found, an empty
// environment, offline.
func options(t *testing.T, state string) doctor.Options {
	t.Helper()
	reg, err := daemon.ReleaseRegistry()
	if err != nil {
		t.Fatal(err)
	}
	return doctor.Options{
		StateDir: state, Registry: reg, Default: bootstrap.DefaultConfig(),
		Keyring:   &fakeKeyring{},
		LookupEnv: func(string) (string, bool) { return "", false },
		Statfs: func(string) (doctor.DiskSpace, error) {
			return doctor.DiskSpace{Available: 50 << 30, Total: 100 << 30}, nil
		},
		LookPath: func(string) (string, error) { return "/usr/bin/bwrap", nil },
		TmpBase:  "/tmp",
		After:    never,
	}
}

func run(t *testing.T, opts doctor.Options) doctor.Report {
	t.Helper()
	rep, err := doctor.Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), ownerToken) {
		t.Fatalf("the report holds the owner's token: %s", b)
	}
	for _, f := range rep.Findings {
		if f.Code == "" || f.Message == "" || !slices.Contains([]doctor.Severity{doctor.SeverityError, doctor.SeverityWarning, doctor.SeverityInfo, doctor.SeverityOK}, f.Severity) {
			t.Errorf("malformed finding %+v", f)
		}
		if (f.Severity == doctor.SeverityError || f.Severity == doctor.SeverityWarning) && f.Fix == "" {
			t.Errorf("finding %+v says nothing about how to fix it", f)
		}
	}
	return rep
}

// find returns the findings with code.
func find(rep doctor.Report, code string) []doctor.Finding {
	var out []doctor.Finding
	for _, f := range rep.Findings {
		if f.Code == code {
			out = append(out, f)
		}
	}
	return out
}

// want requires exactly one finding with code, of severity sev, and
// returns it.
func want(t *testing.T, rep doctor.Report, code string, sev doctor.Severity) doctor.Finding {
	t.Helper()
	fs := find(rep, code)
	if len(fs) != 1 || fs[0].Severity != sev {
		t.Fatalf("findings %s = %+v, want one %s; all: %s", code, fs, sev, dump(rep))
	}
	return fs[0]
}

// problems are the error and warning findings.
func problems(rep doctor.Report) []doctor.Finding {
	var out []doctor.Finding
	for _, f := range rep.Findings {
		if f.Severity == doctor.SeverityError || f.Severity == doctor.SeverityWarning {
			out = append(out, f)
		}
	}
	return out
}

func dump(rep doctor.Report) string {
	b, _ := json.MarshalIndent(rep, "", "  ")
	return string(b)
}

func TestHealthyStateDirectory(t *testing.T) {
	rep := run(t, options(t, newState(t)))
	if !rep.OK || len(problems(rep)) != 0 {
		t.Fatalf("a healthy state directory has problems: %s", dump(rep))
	}
	for _, code := range []string{"state_dir_ok", "token_file_ok", "management_socket_ok", "run_socket_ok", "os_binary_ok", "disk_space_ok",
		"config_ok", "grants_ok", "secrets_ok", "keyring_available", "sandbox_bwrap_available"} {
		if len(find(rep, code)) != 1 {
			t.Errorf("no %s finding: %s", code, dump(rep))
		}
	}
	want(t, rep, "daemon_not_asked", doctor.SeverityInfo)
	if f := want(t, rep, "config_source", doctor.SeverityInfo); !strings.Contains(f.Message, "default configuration") {
		t.Errorf("without config.json the default is checked: %+v", f)
	}
}

func TestMissingStateDirectory(t *testing.T) {
	state := filepath.Join(newState(t), "nope")
	rep := run(t, options(t, state))
	f := want(t, rep, "state_dir_missing", doctor.SeverityError)
	if f.Fix != "open-conduit daemon --state "+state || rep.OK {
		t.Fatalf("missing state directory: %+v, ok %v", f, rep.OK)
	}
}

func TestStateDirectoryOthersCanReach(t *testing.T) {
	state := newState(t)
	if err := os.Chmod(state, 0o755); err != nil {
		t.Fatal(err)
	}
	rep := run(t, options(t, state))
	if f := want(t, rep, "state_dir_mode", doctor.SeverityError); f.Fix != "chmod 700 "+state || !strings.Contains(f.Message, "0755") {
		t.Fatalf("state_dir_mode: %+v", f)
	}
	if rep.OK || len(find(rep, "state_dir_ok")) != 0 {
		t.Fatalf("an open state directory passes: %s", dump(rep))
	}
}

func TestWorldReadableTokenFiles(t *testing.T) {
	state := newState(t)
	owner := filepath.Join(state, "private", "operator.token")
	if err := os.Chmod(owner, 0o644); err != nil {
		t.Fatal(err)
	}
	runToken := filepath.Join(state, "runs", runs.Key("exe_1"), "token", "token")
	mkdir(t, filepath.Dir(runToken))
	write(t, runToken, ownerToken, 0o640)
	rep := run(t, options(t, state))
	fs := find(rep, "token_file_mode")
	if len(fs) != 2 || rep.OK {
		t.Fatalf("token_file_mode findings %+v, want two errors", fs)
	}
	if fs[0].Severity != doctor.SeverityError || fs[0].Fix != "chmod 600 "+owner+" && open-conduit auth rotate" || !strings.Contains(fs[0].Message, "0644") {
		t.Errorf("owner token finding %+v", fs[0])
	}
	if fs[1].Severity != doctor.SeverityError || fs[1].Fix != "chmod 600 "+runToken {
		t.Errorf("run token finding %+v", fs[1])
	}
	if len(find(rep, "token_file_ok")) != 0 {
		t.Errorf("a readable token file is also ok: %s", dump(rep))
	}
}

func TestMissingTokenFile(t *testing.T) {
	state := newState(t)
	if err := os.Remove(filepath.Join(state, "private", "operator.token")); err != nil {
		t.Fatal(err)
	}
	f := want(t, run(t, options(t, state)), "token_file_missing", doctor.SeverityWarning)
	if !strings.Contains(f.Fix, "open-conduit auth recover --state "+state) {
		t.Fatalf("token_file_missing: %+v", f)
	}
}

func TestOtherModes(t *testing.T) {
	state := newState(t)
	if err := os.Chmod(filepath.Join(state, "private"), 0o750); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(state, "secrets.json"), `{}`, 0o644)
	if err := os.Chmod(filepath.Join(state, "coordination.db"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := run(t, options(t, state))
	if f := want(t, rep, "private_dir_mode", doctor.SeverityError); f.Fix != "chmod 700 "+filepath.Join(state, "private") {
		t.Errorf("private_dir_mode: %+v", f)
	}
	if f := want(t, rep, "secrets_file_mode", doctor.SeverityError); f.Fix != "chmod 600 "+filepath.Join(state, "secrets.json") {
		t.Errorf("secrets_file_mode: %+v", f)
	}
	if f := want(t, rep, "file_mode", doctor.SeverityWarning); f.Fix != "chmod 600 "+filepath.Join(state, "coordination.db") {
		t.Errorf("file_mode: %+v", f)
	}
}

// deepState makes a healthy state directory whose absolute path is n
// bytes long.
func deepState(t *testing.T, n int) string {
	t.Helper()
	base := filepath.Dir(newState(t))
	state := base
	for n-len(state)-1 > 40 {
		state = filepath.Join(state, strings.Repeat("d", 30))
	}
	state = filepath.Join(state, strings.Repeat("s", n-len(state)-1))
	if len(state) != n {
		t.Fatalf("made a path of %d bytes, want %d", len(state), n)
	}
	mkdir(t, state)
	return state
}

func TestSocketPathsTooLong(t *testing.T) {
	// 90 bytes: management.sock (+16) passes 100, and so do the run
	// directories' sockets, which fall back to the short directory.
	rep := run(t, options(t, deepState(t, 90)))
	if f := want(t, rep, "management_socket_too_long", doctor.SeverityError); !strings.Contains(f.Message, "106 bytes") || !strings.Contains(f.Fix, "mv ") {
		t.Errorf("management_socket_too_long: %+v", f)
	}
	want(t, rep, "run_socket_fallback", doctor.SeverityInfo)
	if rep.OK {
		t.Error("a socket path too long passes")
	}

	// 70 bytes: the management socket fits, the run sockets do not and
	// fall back.
	rep = run(t, options(t, deepState(t, 70)))
	want(t, rep, "management_socket_ok", doctor.SeverityOK)
	if f := want(t, rep, "run_socket_fallback", doctor.SeverityInfo); !strings.Contains(f.Message, "/tmp/open-conduit-") {
		t.Errorf("run_socket_fallback: %+v", f)
	}

	// With a fallback base too long as well, attempts cannot have a socket.
	opts := options(t, deepState(t, 70))
	opts.TmpBase = "/tmp/" + strings.Repeat("t", 60)
	rep = run(t, opts)
	want(t, rep, "run_socket_too_long", doctor.SeverityError)
	if rep.OK {
		t.Error("run sockets that fit nowhere pass")
	}
}

func TestOSBinary(t *testing.T) {
	osPath := func(state string) string { return filepath.Join(state, "bin", "os") }
	cases := map[string]struct {
		setup func(t *testing.T, state string)
		code  string
		sev   doctor.Severity
		fix   string
	}{
		"missing after a start": {func(t *testing.T, s string) { os.Remove(osPath(s)) }, "os_binary_missing", doctor.SeverityWarning, "open-conduit daemon --state "},
		"never installed": {func(t *testing.T, s string) {
			os.Remove(osPath(s))
			os.Remove(filepath.Join(s, "coordination.db"))
		}, "os_binary_missing", doctor.SeverityInfo, "open-conduit daemon --state "},
		"dangling link": {func(t *testing.T, s string) {
			os.Remove(osPath(s))
			if err := os.Symlink(filepath.Join(s, "gone", "open-conduit"), osPath(s)); err != nil {
				t.Fatal(err)
			}
		}, "os_binary_dangling", doctor.SeverityError, "restart the daemon"},
		"link into a go run build directory": {func(t *testing.T, s string) {
			exe := filepath.Join(s, "go-build1234", "b001", "exe", "open-conduit")
			mkdir(t, filepath.Dir(exe))
			write(t, exe, "#!/bin/sh\n", 0o755)
			os.Remove(osPath(s))
			if err := os.Symlink(exe, osPath(s)); err != nil {
				t.Fatal(err)
			}
		}, "os_binary_temporary", doctor.SeverityError, "restart the daemon"},
		"link of an earlier release": {func(t *testing.T, s string) {
			os.Remove(osPath(s))
			if err := os.Symlink("/bin/sh", osPath(s)); err != nil {
				t.Fatal(err)
			}
		}, "os_binary_link", doctor.SeverityWarning, "restart the daemon"},
		"not executable": {func(t *testing.T, s string) { os.Chmod(osPath(s), 0o644) }, "os_binary_not_executable", doctor.SeverityError, "chmod 755 "},
		"a directory": {func(t *testing.T, s string) {
			os.Remove(osPath(s))
			mkdir(t, osPath(s))
		}, "os_binary_not_file", doctor.SeverityError, "rm -r "},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			state := newState(t)
			c.setup(t, state)
			rep := run(t, options(t, state))
			f := want(t, rep, c.code, c.sev)
			if !strings.Contains(f.Fix, c.fix) {
				t.Errorf("fix %q does not say %q", f.Fix, c.fix)
			}
			if len(find(rep, "os_binary_ok")) != 0 {
				t.Errorf("also os_binary_ok: %s", dump(rep))
			}
			if rep.OK != (c.sev != doctor.SeverityError) {
				t.Errorf("ok = %v with a %s finding", rep.OK, c.sev)
			}
		})
	}
}

// writeConfig writes a configuration file beside the state directory and
// returns its path.
func writeConfig(t *testing.T, state, doc string) string {
	t.Helper()
	p := filepath.Join(filepath.Dir(state), "config.json")
	write(t, p, doc, 0o600)
	return p
}

const secretsConfig = `{"version": 1,
 "secrets": {"deploy": "env:OC_DOCTOR_UNSET_VARIABLE", "spare": "env:OC_DOCTOR_OTHER_VARIABLE", "db": "file:db_password", "kr": "keyring:svc/user"},
 "scopes": {"s": {"bindings": {"b": {"executor": "shell", "config": {"command": ["true"]},
   "secrets": {"TOKEN": "deploy", "DB": "db", "KR": "kr"}}}}}}`

func TestUnresolvableSecrets(t *testing.T) {
	state := newState(t)
	write(t, filepath.Join(state, "secrets.json"), `{"db_password": "s3cr3t-value-from-file"}`, 0o600)
	opts := options(t, state)
	opts.ConfigFile = writeConfig(t, state, secretsConfig)
	opts.Keyring = &fakeKeyring{items: map[string]string{"svc/user": "s3cr3t-value-from-keyring"}}
	rep := run(t, opts)
	fs := find(rep, "secret_unresolved")
	if len(fs) != 2 {
		t.Fatalf("secret_unresolved findings %+v, want deploy and spare", fs)
	}
	if f := fs[0]; f.Severity != doctor.SeverityError || !strings.Contains(f.Message, "secret deploy ") || !strings.Contains(f.Message, "selected by s/b") ||
		!strings.Contains(f.Message, config.SecretNotFound) || !strings.Contains(f.Fix, "daemon's environment") {
		t.Errorf("deploy: %+v", f)
	}
	if f := fs[1]; f.Severity != doctor.SeverityWarning || !strings.Contains(f.Message, "secret spare ") || !strings.Contains(f.Message, "no active binding") {
		t.Errorf("spare: %+v", f)
	}
	b, _ := json.Marshal(rep)
	for _, never := range []string{"OC_DOCTOR_UNSET_VARIABLE", "OC_DOCTOR_OTHER_VARIABLE", "db_password", "svc/user", "s3cr3t-value"} {
		if strings.Contains(string(b), never) {
			t.Errorf("the report holds %q: %s", never, b)
		}
	}
	if rep.OK {
		t.Error("a selected secret that does not resolve passes")
	}
	want(t, rep, "keyring_available", doctor.SeverityOK)

	// Once the variables are set, every secret resolves.
	opts.LookupEnv = func(k string) (string, bool) { return "v", strings.HasPrefix(k, "OC_DOCTOR_") }
	rep = run(t, opts)
	if f := want(t, rep, "secrets_ok", doctor.SeverityOK); !strings.Contains(f.Message, "(4)") || !rep.OK {
		t.Fatalf("secrets_ok %+v, ok %v: %s", f, rep.OK, dump(rep))
	}
}

func TestKeyringUnavailable(t *testing.T) {
	state := newState(t)
	opts := options(t, state)
	opts.Keyring = &fakeKeyring{err: errors.New("no D-Bus session: " + ownerToken)}
	rep := run(t, opts)
	if f := want(t, rep, "keyring_unavailable", doctor.SeverityInfo); !strings.Contains(f.Message, "no secret uses keyring:") {
		t.Errorf("keyring_unavailable without keyring secrets: %+v", f)
	}

	opts.ConfigFile = writeConfig(t, state, `{"version": 1, "secrets": {"kr": "keyring:svc/user"},
	  "scopes": {"s": {"bindings": {"b": {"executor": "shell", "config": {"command": ["true"]}, "secrets": {"KR": "kr"}}}}}}`)
	rep = run(t, opts)
	want(t, rep, "keyring_unavailable", doctor.SeverityWarning)
	if f := want(t, rep, "secret_unresolved", doctor.SeverityError); !strings.Contains(f.Message, config.KeyringUnavailable) {
		t.Errorf("secret_unresolved: %+v", f)
	}

	// A keyring that never answers is unavailable once the timer fires.
	block := make(chan struct{})
	defer close(block)
	opts.ConfigFile = ""
	opts.Keyring = &fakeKeyring{block: block}
	fired := make(chan time.Time)
	close(fired)
	opts.After = func(time.Duration) <-chan time.Time { return fired }
	rep = run(t, opts)
	want(t, rep, "keyring_unavailable", doctor.SeverityInfo)
}

// playbook writes an operator playbook declaring ops into dir/playbooks.
func playbook(t *testing.T, dir, name string, ops ...string) {
	t.Helper()
	mkdir(t, filepath.Join(dir, "playbooks"))
	write(t, filepath.Join(dir, "playbooks", name+".md"),
		"---\nname: "+name+"\ndescription: a test playbook\noperations: ["+strings.Join(ops, ", ")+"]\n---\nDo the work.\n", 0o600)
}

func TestGrantWarnings(t *testing.T) {
	state := newState(t)
	playbook(t, filepath.Dir(state), "triage", "introspection.work")
	opts := options(t, state)
	opts.ConfigFile = writeConfig(t, state, `{"version": 1,
	  "scopes": {"s": {"authorization": {"operations": ["emit", "@introspection.reader"]},
	    "bindings": {"b": {"executor": "shell", "config": {"command": ["true"]}, "operations": ["emit"], "playbook": "triage"}},
	    "routes": [{"id": "never", "match": {"type": "core.work.created"}, "binding": "b"}]}}}`)
	rep := run(t, opts)
	g := want(t, rep, "grant_warning", doctor.SeverityWarning)
	if !strings.Contains(g.Message, config.WarnPlaybookNotGranted) || !strings.Contains(g.Message, "introspection.work") ||
		!strings.HasPrefix(g.Fix, `open-conduit config set /scopes/s/bindings/b/operations '["emit","introspection.work"]'`) {
		t.Errorf("grant_warning: %+v", g)
	}
	if f := want(t, rep, "config_warning", doctor.SeverityWarning); !strings.Contains(f.Message, config.WarnRouteNeverFires) {
		t.Errorf("config_warning: %+v", f)
	}
	if len(find(rep, "grants_ok")) != 0 || !rep.OK {
		t.Errorf("warnings fail doctor or grants pass: %s", dump(rep))
	}
}

func TestInvalidConfig(t *testing.T) {
	state := newState(t)
	opts := options(t, state)
	opts.ConfigFile = writeConfig(t, state, `{"version": 1, "scopes": {"s": {"bindings": {"b": {"executor": "no-such-executor"}}}}}`)
	rep := run(t, opts)
	f := want(t, rep, "config_invalid", doctor.SeverityError)
	if !strings.Contains(f.Message, "/scopes/s/bindings/b/executor") || f.Fix != "edit "+opts.ConfigFile+", then: open-conduit config check "+opts.ConfigFile {
		t.Errorf("config_invalid: %+v", f)
	}
	want(t, rep, "secrets_unchecked", doctor.SeverityInfo)
	if rep.OK {
		t.Error("an invalid configuration passes")
	}

	opts.ConfigFile = filepath.Join(state, "absent.json")
	want(t, run(t, opts), "config_unreadable", doctor.SeverityError)
}

func TestStateConfigFileIsChecked(t *testing.T) {
	state := newState(t)
	write(t, filepath.Join(state, "config.json"), `{"version": 1, "scopes": {"s": {"bindings": {"b": {"executor": "shell", "config": {"command": ["true"]}, "playbook": "p"}}}}}`, 0o600)
	playbook(t, state, "p", "introspection.work")
	rep := run(t, options(t, state))
	if f := want(t, rep, "config_source", doctor.SeverityInfo); !strings.Contains(f.Message, filepath.Join(state, "config.json")) {
		t.Errorf("config_source: %+v", f)
	}
	want(t, rep, "grant_warning", doctor.SeverityWarning)
}

func TestDiskSpace(t *testing.T) {
	for _, c := range []struct {
		avail uint64
		err   error
		code  string
		sev   doctor.Severity
	}{
		{50 << 20, nil, "disk_space_critical", doctor.SeverityError},
		{500 << 20, nil, "disk_space_low", doctor.SeverityWarning},
		{2 << 30, nil, "disk_space_ok", doctor.SeverityOK},
		{0, errors.New("statfs failed"), "disk_space_unknown", doctor.SeverityWarning},
	} {
		opts := options(t, newState(t))
		opts.Statfs = func(string) (doctor.DiskSpace, error) {
			return doctor.DiskSpace{Available: c.avail, Total: 100 << 30}, c.err
		}
		rep := run(t, opts)
		want(t, rep, c.code, c.sev)
		if rep.OK != (c.sev != doctor.SeverityError) {
			t.Errorf("%s: ok = %v", c.code, rep.OK)
		}
	}
}

func TestSandboxMissing(t *testing.T) {
	opts := options(t, newState(t))
	opts.LookPath = func(string) (string, error) { return "", errors.New("not found") }
	rep := run(t, opts)
	if f := want(t, rep, "sandbox_bwrap_missing", doctor.SeverityInfo); !strings.Contains(f.Fix, "bubblewrap") || !rep.OK {
		t.Errorf("sandbox_bwrap_missing: %+v, ok %v", f, rep.OK)
	}
}

// snapshot is every path under dir with its mode and content.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		v := fi.Mode().String()
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			v += " " + string(b)
		}
		out[p] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDoctorChangesNothing(t *testing.T) {
	state := newState(t)
	os.Chmod(filepath.Join(state, "private", "operator.token"), 0o644)
	os.Chmod(filepath.Join(state, "bin", "os"), 0o600)
	os.Chmod(state, 0o750)
	defer os.Chmod(state, 0o700)
	before := snapshot(t, filepath.Dir(state))
	run(t, options(t, state))
	after := snapshot(t, filepath.Dir(state))
	if len(before) != len(after) {
		t.Fatalf("doctor added or removed files: %d before, %d after", len(before), len(after))
	}
	for p, v := range before {
		if after[p] != v {
			t.Errorf("doctor changed %s: %q, then %q", p, v, after[p])
		}
	}
}

// fakeDaemon answers doctor's questions from fields.
type fakeDaemon struct {
	healthErr error
	state     string
	hash      string
	work      map[string][][]api.Work // by state, pages
	validated *api.Validation
	asked     []string
}

func (d *fakeDaemon) Health(context.Context) (*client.Health, error) {
	if d.healthErr != nil {
		return nil, d.healthErr
	}
	return &client.Health{Health: api.Health{Status: "ok", State: d.state, Version: "v9", Generation: 3}}, nil
}

func (d *fakeDaemon) Config(context.Context, *client.RequestOptions) (*client.Config, error) {
	var c client.Config
	err := json.Unmarshal([]byte(`{"generation": 3, "hash": "`+d.hash+`", "config": {}}`), &c)
	return &c, err
}

func (d *fakeDaemon) ValidateConfig(context.Context, []byte) (*client.Validation, error) {
	if d.validated == nil {
		return nil, errors.New("validate is not served")
	}
	return &client.Validation{Validation: *d.validated}, nil
}

func (d *fakeDaemon) ListWork(_ context.Context, f client.WorkFilter) (*client.List[client.Work], error) {
	d.asked = append(d.asked, f.State+"@"+f.Cursor)
	pages := d.work[f.State]
	i := 0
	if f.Cursor != "" {
		i = int(f.Cursor[0] - '0')
	}
	out := &client.List[client.Work]{}
	if i < len(pages) {
		for _, w := range pages[i] {
			out.Items = append(out.Items, client.Work{Work: w})
		}
		if i+1 < len(pages) {
			out.NextCursor = string(rune('0' + i + 1))
		}
	}
	return out, nil
}

func TestDaemonNotRunning(t *testing.T) {
	state := newState(t)
	opts := options(t, state)
	opts.Socket = filepath.Join(state, "management.sock")
	opts.Daemon = &fakeDaemon{healthErr: &client.UnreachableError{Socket: opts.Socket, Err: errors.New("connection refused")}}
	rep := run(t, opts)
	want(t, rep, "daemon_not_running", doctor.SeverityInfo)
	if !rep.OK || len(find(rep, "work_none_held")) != 0 {
		t.Fatalf("a stopped daemon: %s", dump(rep))
	}
	// The os binary missing with a daemon not running is the next start's
	// to install.
	os.Remove(filepath.Join(state, "bin", "os"))
	want(t, run(t, opts), "os_binary_missing", doctor.SeverityWarning)
}

func TestDaemonRefusesTheToken(t *testing.T) {
	opts := options(t, newState(t))
	opts.Daemon = &fakeDaemon{healthErr: &client.APIError{Status: 401, Code: "unauthorized", Message: "no"}}
	rep := run(t, opts)
	if f := want(t, rep, "daemon_unauthorized", doctor.SeverityError); !strings.Contains(f.Fix, "open-conduit auth recover") {
		t.Errorf("daemon_unauthorized: %+v", f)
	}
}

func TestDaemonHeldWork(t *testing.T) {
	state := newState(t)
	opts := options(t, state)
	d := &fakeDaemon{state: api.HealthReady, work: map[string][][]api.Work{
		api.WorkReady: {
			{{ID: "wrk_a", Scope: "s", Binding: "b", State: api.WorkReady}},
			{{ID: "wrk_b", Scope: "s", Binding: "b", State: api.WorkReady, BlockedReason: "secret_unavailable", BlockedDetail: "secret deploy could not be resolved"}},
		},
		api.WorkWaiting: {{{ID: "wrk_c", Scope: "s", Binding: "b", State: api.WorkWaiting, BlockedReason: "operator_cancelled", BlockedDetail: "an operator cancelled it"}}},
	}}
	opts.Daemon = d
	rep := run(t, opts)
	want(t, rep, "daemon_ready", doctor.SeverityOK)
	held := find(rep, "work_held")
	if len(held) != 2 {
		t.Fatalf("work_held %+v, want wrk_b and wrk_c (asked %v)", held, d.asked)
	}
	if !strings.Contains(held[0].Message, "wrk_b") || !strings.Contains(held[0].Message, "secret_unavailable") || !strings.HasSuffix(held[0].Fix, "open-conduit work retry wrk_b") {
		t.Errorf("held wrk_b: %+v", held[0])
	}
	if !strings.Contains(held[1].Fix, "open-conduit work cancel wrk_c") || !strings.HasSuffix(held[1].Fix, "open-conduit work retry wrk_c") {
		t.Errorf("held wrk_c: %+v", held[1])
	}
	if !rep.OK {
		t.Errorf("held Work fails doctor: %s", dump(rep))
	}

	// Nothing held.
	opts.Daemon = &fakeDaemon{state: api.HealthReady}
	want(t, run(t, opts), "work_none_held", doctor.SeverityOK)

	// Starting.
	opts.Daemon = &fakeDaemon{state: api.HealthStarting}
	want(t, run(t, opts), "daemon_starting", doctor.SeverityWarning)

	// A daemon that answers makes a missing os binary an error.
	os.Remove(filepath.Join(state, "bin", "os"))
	want(t, run(t, opts), "os_binary_missing", doctor.SeverityError)
}

func TestDaemonActiveGenerationAndItsJudgement(t *testing.T) {
	state := newState(t)
	gen := filepath.Join(state, "private", "generations")
	mkdir(t, gen)
	write(t, filepath.Join(gen, "abc.json"), `{"version": 1, "secrets": {"x": "env:OC_DOCTOR_GEN_SECRET"},
	  "scopes": {"s": {"bindings": {"b": {"executor": "shell", "config": {"command": ["true"]}, "secrets": {"X": "x"}}}}}}`, 0o600)
	// config.json was edited since the last apply.
	write(t, filepath.Join(state, "config.json"), `{"version": 1}`, 0o600)
	opts := options(t, state)
	opts.Daemon = &fakeDaemon{state: api.HealthReady, hash: "abc",
		validated: &api.Validation{Valid: true, Diagnostics: []api.Diagnostic{}, Warnings: []api.Warning{{Pointer: "/scopes/s/bindings/b/playbook", Code: config.WarnPlaybookNotGranted, Message: "only the daemon knows"}}}}
	rep := run(t, opts)
	if f := want(t, rep, "config_source", doctor.SeverityInfo); !strings.Contains(f.Message, "active configuration (generation 3)") || !strings.Contains(f.Message, "as the daemon judges it") {
		t.Errorf("config_source: %+v", f)
	}
	if f := want(t, rep, "grant_warning", doctor.SeverityWarning); !strings.Contains(f.Message, "only the daemon knows") {
		t.Errorf("the daemon's warning is not reported: %+v", f)
	}
	if f := want(t, rep, "secret_unresolved", doctor.SeverityError); !strings.Contains(f.Message, "secret x ") {
		t.Errorf("the active generation's secret: %+v", f)
	}
	if f := want(t, rep, "config_not_applied", doctor.SeverityInfo); !strings.Contains(f.Fix, "open-conduit config apply "+filepath.Join(state, "config.json")) {
		t.Errorf("config_not_applied: %+v", f)
	}
}
