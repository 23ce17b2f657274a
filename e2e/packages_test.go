package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/open-conduit/open-conduit/api"
)

// deployManifest is the manifest of the test package: one call operation
// and a toolset granting it.
const deployManifest = `{
  "name": "deploy",
  "version": "VERSION",
  "summary": "Deploys a service (test package)",
  "run": {"command": ["./server"]},
  "provides": {
    "operations": [{"name": "deploy.run", "summary": "Deploy one service", "input_schema": {"type": "object"}}],
    "toolsets": [{"name": "deploy.operator", "operations": [{"name": "deploy.run", "since": "1.0.0"}, {"name": "read_context", "since": "1.0.0"}]}]
  }
}`

// writePackageDir writes a package directory under the env's root.
func (e *env) writePackageDir(name, manifest string) string {
	e.t.Helper()
	dir := filepath.Join(e.root, "pkg-"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "open-conduit-package.json"), []byte(manifest), 0o644); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "server"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		e.t.Fatal(err)
	}
	return dir
}

// packagesConfig is a configuration with a scope t whose binding job runs
// script; with the package, it enables extensions.deploy and grants its
// toolset.
func (e *env) packagesConfig(withPackage bool, script string) string {
	e.t.Helper()
	ops := `["read_context", "declare_outcome"]`
	ext := ""
	if withPackage {
		ops = `["read_context", "declare_outcome", "@deploy.operator"]`
		ext = `"extensions": {"deploy": {"enabled": true}},`
	}
	cfg := `{"version": 1, ` + ext + `
  "scopes": {"t": {
    "authorization": {"operations": ` + ops + `, "reads": ["work"]},
    "bindings": {"job": {"executor": "shell", "config": {"command": ["sh", "-c", ` + strconv.Quote(script) + `]}, "operations": ` + ops + `}}
  }}}`
	file := filepath.Join(e.root, "config-"+strconv.FormatBool(withPackage)+".json")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return file
}

// An operator installs a package through the real CLI against the real
// daemon, lists and shows it, an execution calls its operation through
// `os call` (granted by its toolset), and the operator removes it once
// the configuration no longer refers to it: its process is stopped on
// remove and on shutdown. The daemon registers it live, without a
// restart. The package runs on the test daemon's Go runtime
// (E2E_PACKAGE_ECHO): what is proven is the host's side.
func TestPackageInstallCallRemove(t *testing.T) {
	e := newEnv(t)
	events := filepath.Join(e.root, "package-events")
	pkgEnv := []string{"E2E_PACKAGE_ECHO=1", "E2E_PACKAGE_EVENTS=" + events}
	d := e.startTestDaemon(pkgEnv...)
	src := e.writePackageDir("deploy", strings.Replace(deployManifest, "VERSION", "1.0.0", 1))

	// Without a terminal and without the flag, nothing is installed.
	code, out, stderr := e.cli("packages", "install", src)
	if code != 1 || !strings.Contains(stderr, "--accept-permissions") || !strings.Contains(out, "operation deploy.run: Deploy one service") {
		t.Fatalf("install without accepting: exit %d %q %q", code, out, stderr)
	}
	var list api.Page[api.Package]
	e.cliJSON(&list, "packages", "list")
	if len(list.Items) != 0 {
		t.Fatalf("installed without acceptance: %+v", list.Items)
	}

	code, out, stderr = e.cli("packages", "install", src, "--accept-permissions")
	if code != 0 || !strings.Contains(out, "toolset @deploy.operator: deploy.run, read_context") || !strings.Contains(out, "Installed deploy 1.0.0 (running)") {
		t.Fatalf("install: exit %d %q %q", code, out, stderr)
	}
	code, out, _ = e.cli("packages", "list")
	if code != 0 || !strings.Contains(out, "deploy") || !strings.Contains(out, "running") {
		t.Fatalf("list: exit %d %q", code, out)
	}
	var shown api.Package
	e.cliJSON(&shown, "packages", "show", "deploy")
	if shown.Name != "deploy" || shown.Version != "1.0.0" || shown.Kind != "protocol" || shown.State != "running" ||
		!strings.HasPrefix(shown.FilesHash, "sha256:") || len(shown.Provides.Operations) != 1 || shown.InstalledAt == nil {
		t.Fatalf("show: %+v", shown)
	}
	if st, err := os.Stat(filepath.Join(e.state, "packages", "deploy", "files", "server")); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("the installed copy: %v %v", st, err)
	}

	// Enabled and granted by a new generation; a shell execution calls it.
	mark := filepath.Join(e.root, "called")
	script := `os call deploy.run --input '{"service":"web"}' > ` + strconv.Quote(mark)
	if code, out, stderr := e.cli("config", "apply", e.packagesConfig(true, script)); code != 0 {
		t.Fatalf("config apply: exit %d %q %q", code, out, stderr)
	}
	w := e.createOn("t", "job")
	e.waitWork(w.ID, "succeeded", func(w work) bool { return w.State == "succeeded" })
	data, err := os.ReadFile(mark)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Package, Operation, Work string
		Input                    json.RawMessage
	}
	if err := json.Unmarshal(data, &res); err != nil || res.Package != "deploy" || res.Operation != "deploy.run" || res.Work != w.ID || compact(res.Input) != `{"service":"web"}` {
		t.Fatalf("os call printed %q (%v)", data, err)
	}

	// Removal is refused while the configuration refers to the package.
	code, out, stderr = e.cli("packages", "remove", "deploy")
	if code != 1 || !strings.Contains(stderr, "conflict") || !strings.Contains(stderr, "/extensions/deploy") {
		t.Fatalf("remove while configured: exit %d %q %q", code, out, stderr)
	}
	if code, out, stderr := e.cli("config", "apply", e.packagesConfig(false, "true")); code != 0 {
		t.Fatalf("config apply: exit %d %q %q", code, out, stderr)
	}
	code, out, stderr = e.cli("packages", "remove", "deploy")
	if code != 0 || !strings.Contains(out, "Removed deploy 1.0.0") {
		t.Fatalf("remove: exit %d %q %q", code, out, stderr)
	}
	if got := readLines(t, events); strings.Join(got, ";") != "start deploy;stop deploy" {
		t.Fatalf("the runtime saw %q", got)
	}
	if _, err := os.Stat(filepath.Join(e.state, "packages", "deploy")); !os.IsNotExist(err) {
		t.Fatalf("the package's files are still there: %v", err)
	}
	e.cliJSON(&list, "packages", "list")
	if len(list.Items) != 0 {
		t.Fatalf("still listed: %+v", list.Items)
	}
	if code, _, stderr := e.cli("packages", "show", "deploy"); code != 1 || !strings.Contains(stderr, "not_found") {
		t.Fatalf("show after remove: exit %d %q", code, stderr)
	}

	// Installed again, then the daemon stops: the package stops with it.
	if code, out, stderr := e.cli("packages", "install", src, "--accept-permissions"); code != 0 {
		t.Fatalf("install again: exit %d %q %q", code, out, stderr)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("daemon stop: exit %d", code)
	}
	if got := readLines(t, events); strings.Join(got, ";") != "start deploy;stop deploy;start deploy;stop deploy" {
		t.Fatalf("the runtime saw %q", got)
	}

	// A newer version replaces it.
	e.startTestDaemon(pkgEnv...)
	newer := e.writePackageDir("deploy2", strings.Replace(deployManifest, "VERSION", "1.1.0", 1))
	code, out, stderr = e.cli("packages", "install", newer, "--accept-permissions")
	if code != 0 || !strings.Contains(out, "It replaces the installed deploy 1.0.0.") || !strings.Contains(out, "Replaced deploy 1.0.0: deploy 1.1.0") {
		t.Fatalf("install a newer version: exit %d %q %q", code, out, stderr)
	}
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

func readLines(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

// Manifests that squat a name the host takes (github, emit) or ask for a
// permission nobody defined are refused at install with their
// diagnostics, through the CLI; nothing is installed.
func TestPackageInstallRefusesSquattersAndUndeclaredPermissions(t *testing.T) {
	e := newEnv(t)
	e.startTestDaemon("E2E_PACKAGE_ECHO=1")
	cases := map[string]struct{ manifest, want string }{
		"github": {strings.ReplaceAll(strings.Replace(deployManifest, "VERSION", "1.0.0", 1), "deploy", "github"), "open-conduit-package.json/name: name_taken"},
		"emit":   {strings.ReplaceAll(strings.Replace(deployManifest, "VERSION", "1.0.0", 1), "deploy", "emit"), "open-conduit-package.json/name: name_taken"},
		"perm": {strings.Replace(strings.Replace(deployManifest, "VERSION", "1.0.0", 1), `"run":`, `"permissions": ["network.any"], "run":`, 1),
			"open-conduit-package.json/permissions/0: unknown_permission"},
	}
	for name, tc := range cases {
		dir := e.writePackageDir(name, tc.manifest)
		code, out, stderr := e.cli("packages", "install", dir, "--accept-permissions")
		if code != 1 || !strings.Contains(out, tc.want) || !strings.Contains(stderr, "does not check") {
			t.Errorf("%s: exit %d %q %q, want %q", name, code, out, stderr, tc.want)
		}
		code, _, stderr = e.cli("packages", "install", dir, "--accept-permissions", "--json")
		var env api.ErrorEnvelope
		if code != 1 || json.Unmarshal([]byte(stderr), &env) != nil || env.Error.Code != "invalid_package" {
			t.Errorf("%s --json: exit %d %q", name, code, stderr)
		}
	}
	// Installing needs the admin role; listing, view.
	vera := e.addOperator("vera", "operate")
	good := e.writePackageDir("deploy", strings.Replace(deployManifest, "VERSION", "1.0.0", 1))
	code, _, stderr := e.cli("--token-file", vera.file, "packages", "install", good, "--accept-permissions")
	if code != 1 || !strings.Contains(stderr, "forbidden_role") || !strings.Contains(stderr, "admin") {
		t.Errorf("an operate credential's install: exit %d %q", code, stderr)
	}
	if code, _, stderr := e.cli("--token-file", vera.file, "packages", "list"); code != 0 {
		t.Errorf("an operate credential's list: exit %d %q", code, stderr)
	}
	var list api.Page[api.Package]
	e.cliJSON(&list, "packages", "list")
	if len(list.Items) != 0 {
		t.Fatalf("installed: %+v", list.Items)
	}
}

// A file of the installed copy changed while the daemon was stopped: at
// start the package is refused (listed as changed, its operation refusing,
// doctor naming the fix) until it is reinstalled. A package whose process
// is in a crash loop shows in packages list and doctor.
func TestChangedPackageIsRefusedUntilReinstalled(t *testing.T) {
	e := newEnv(t)
	pkgEnv := []string{"E2E_PACKAGE_ECHO=1"}
	d := e.startTestDaemon(pkgEnv...)
	src := e.writePackageDir("deploy", strings.Replace(deployManifest, "VERSION", "1.0.0", 1))
	if code, out, stderr := e.cli("packages", "install", src, "--accept-permissions"); code != 0 {
		t.Fatalf("install: exit %d %q %q", code, out, stderr)
	}
	if code, out, stderr := e.cli("config", "apply", e.packagesConfig(true, "true")); code != 0 {
		t.Fatalf("config apply: exit %d %q %q", code, out, stderr)
	}
	d.stop()
	server := filepath.Join(e.state, "packages", "deploy", "files", "server")
	if err := os.WriteFile(server, []byte("#!/bin/sh\necho tampered\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	// The daemon starts (its configuration still names the package), and
	// the package does not run.
	d = e.startTestDaemon(pkgEnv...)
	var shown api.Package
	e.cliJSON(&shown, "packages", "show", "deploy")
	if shown.State != "changed" || shown.Problem == nil || shown.Problem.Code != "package_changed" ||
		!strings.Contains(shown.Problem.Message, "open-conduit packages install") || strings.Contains(shown.Problem.Message, "tampered") {
		t.Fatalf("show: %+v", shown)
	}
	code, rep, _ := e.doctor()
	if code != 1 {
		t.Fatalf("doctor exit %d", code)
	}
	if _, fix := findingOf(t, rep, "package_changed", "error"); !strings.Contains(fix, "open-conduit packages install") {
		t.Errorf("doctor's fix %q", fix)
	}
	if !strings.Contains(e.allLogs(), "files changed since it was installed") {
		t.Error("the daemon did not log the changed package")
	}
	// Reinstalled from its directory, it runs again, at once.
	if code, out, stderr := e.cli("packages", "install", src, "--accept-permissions"); code != 0 {
		t.Fatalf("reinstall: exit %d %q %q", code, out, stderr)
	}
	shown = api.Package{}
	e.cliJSON(&shown, "packages", "show", "deploy")
	if shown.State != "running" || shown.Problem != nil {
		t.Fatalf("after reinstall: %+v", shown)
	}
	d.stop()

	e.startTestDaemon(append(pkgEnv, "E2E_PACKAGE_CRASHLOOP=deploy")...)
	code, out, _ := e.cli("packages", "list")
	if code != 0 || !strings.Contains(out, "package_crash_loop") {
		t.Fatalf("list: exit %d %q", code, out)
	}
	_, rep, _ = e.doctor()
	findingOf(t, rep, "package_crash_loop", "error")
}

// onTerminal runs the CLI with a pseudo-terminal as its standard input,
// the answer already typed on it.
func (e *env) onTerminal(answer string, args ...string) (code int, stdout, stderr string) {
	e.t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		e.t.Skipf("no pseudo-terminals here (/dev/ptmx): %v", err)
	}
	defer ptmx.Close()
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		e.t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		e.t.Fatal(err)
	}
	tty, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	defer tty.Close()
	if _, err := ptmx.WriteString(answer + "\n"); err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := within()
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.openConduit, args...)
	cmd.Env = e.environ()
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, &out, &errb
	err = cmd.Run()
	return exitCode(err), out.String(), errb.String()
}

// On a terminal, install asks y/N after showing the package: no (or
// anything but yes) installs nothing, yes installs it.
func TestPackageInstallAsksOnATerminal(t *testing.T) {
	e := newEnv(t)
	e.startTestDaemon("E2E_PACKAGE_ECHO=1")
	// It provides a gate, so it asks for operation.gate.
	manifest := strings.Replace(deployManifest, "VERSION", "1.0.0", 1)
	manifest = strings.Replace(manifest, `"toolsets"`, `"operation_gate": true, "toolsets"`, 1)
	manifest = strings.Replace(manifest, `"run":`, `"permissions": ["operation.gate"], "run":`, 1)
	src := e.writePackageDir("deploy", manifest)
	code, out, stderr := e.onTerminal("n", "packages", "install", src)
	if code != 1 || !strings.Contains(out, "Install deploy 1.0.0 with these permissions? [y/N]") || !strings.Contains(out, "operation.gate: its gate is asked") ||
		!strings.Contains(stderr, "not accepted") {
		t.Fatalf("answered no: exit %d %q %q", code, out, stderr)
	}
	var list api.Page[api.Package]
	e.cliJSON(&list, "packages", "list")
	if len(list.Items) != 0 {
		t.Fatalf("installed on no: %+v", list.Items)
	}
	code, out, stderr = e.onTerminal("y", "packages", "install", src)
	if code != 0 || !strings.Contains(out, "Installed deploy 1.0.0") {
		t.Fatalf("answered yes: exit %d %q %q", code, out, stderr)
	}
	var shown api.Package
	e.cliJSON(&shown, "packages", "show", "deploy")
	if len(shown.Permissions) != 1 || shown.Permissions[0] != "operation.gate" {
		t.Fatalf("accepted %v", shown.Permissions)
	}
}
