package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// The CLI conventions of issue 14 that need the real binaries: config
// get's output applies back and config diff says what an apply would do;
// --watch follows a list until Ctrl-C or the daemon's end; one JSON shape
// per command whatever its flags.

// withSecret is a configuration with a secret reference (never resolved
// here: no binding selects it) besides the default setup scope.
const withSecret = `{
  "version": 1,
  "secrets": {"deploy": "env:OC_E2E_DEPLOY_TOKEN"},
  "scopes": {
    "setup": {"bindings": {"shell": {"executor": "shell", "config": {"command": ["sh", "-c", "echo hi"]}}}}
  }
}
`

func (e *env) file(name, content string) string {
	e.t.Helper()
	p := filepath.Join(e.root, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// config get > f && config apply f makes no generation, config diff of it
// exits 0; an edited copy diffs with exit 1 and, applied, keeps the
// secret's reference that config get showed redacted.
func TestConfigGetAppliesBackAndDiffShowsTheChange(t *testing.T) {
	e := newEnv(t)
	e.start()
	if code, out, errs := e.cli("config", "apply", e.file("first.json", withSecret)); code != 0 || !strings.Contains(out, "Applied: generation 2") {
		t.Fatalf("config apply: exit %d %q %q", code, out, errs)
	}
	code, doc, meta := e.cli("config", "get")
	if code != 0 || !strings.Contains(meta, "generation 2, hash ") || !strings.Contains(doc, `"env:<redacted>"`) || strings.Contains(doc, "OC_E2E_DEPLOY_TOKEN") {
		t.Fatalf("config get: exit %d, stdout %q, stderr %q", code, doc, meta)
	}
	got := e.file("got.json", doc)
	if code, out, errs := e.cli("config", "apply", got); code != 0 || !strings.Contains(out, "Unchanged: generation 2") {
		t.Fatalf("config apply of config get's output: exit %d %q %q", code, out, errs)
	}
	if code, out, _ := e.cli("config", "diff", got); code != 0 || !strings.HasPrefix(out, "Identical: ") {
		t.Errorf("config diff of config get's output: exit %d %q", code, out)
	}
	edited := strings.Replace(doc, `"scopes": {`, `"scopes": {
    "extra": {
      "bindings": {"job": {"config": {"command": ["true"]}, "executor": "shell"}}
    },`, 1)
	f := e.file("edited.json", edited)
	code, out, _ := e.cli("config", "diff", f)
	if code != 1 || !strings.Contains(out, "+    \"extra\": {") || !strings.Contains(out, "scopes: 1 added, 0 removed, 0 changed; bindings: 1 added") {
		t.Fatalf("config diff of an edited copy: exit %d\n%s", code, out)
	}
	var d struct {
		Identical bool `json:"identical"`
		Changes   []struct{ Pointer, Kind, Change string }
	}
	code, out, _ = e.cli("config", "diff", f, "--json")
	if json.Unmarshal([]byte(out), &d) != nil || code != 1 || d.Identical || len(d.Changes) != 2 || d.Changes[0].Pointer != "/scopes/extra" {
		t.Errorf("config diff --json: exit %d %q", code, out)
	}
	if code, out, errs := e.cli("config", "apply", f); code != 0 || !strings.Contains(out, "Applied: generation 3") {
		t.Fatalf("config apply of the edited copy: exit %d %q %q", code, out, errs)
	}
	saved, err := os.ReadFile(filepath.Join(e.state, "config.json"))
	if err != nil || !strings.Contains(string(saved), "env:OC_E2E_DEPLOY_TOKEN") || strings.Contains(string(saved), "<redacted>") {
		t.Fatalf("config.json after applying the edited copy: %v\n%s", err, saved)
	}
	if code, _, _ := e.cli("config", "diff", f); code != 0 {
		t.Errorf("config diff after the apply: exit %d", code)
	}
	if code, _, errs := e.cli("config", "diff"); code != 2 {
		t.Errorf("config diff without FILE: exit %d %q", code, errs)
	}
}

// watcher is an open-conduit command left running, its output read line
// by line as it comes.
type watcher struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *syncBuffer
}

func (e *env) watch(args ...string) *watcher {
	e.t.Helper()
	cmd := exec.Command(bins.openConduit, args...)
	cmd.Env = e.environ()
	out, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	w := &watcher{cmd: cmd, lines: make(chan string, 1000), stderr: &syncBuffer{}}
	cmd.Stderr = w.stderr
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = cmd.Process.Kill() })
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
		close(w.lines)
	}()
	return w
}

// next is the next line the command prints that holds want; it fails
// when the command ends first.
func (w *watcher) next(t *testing.T, want string) string {
	t.Helper()
	for l := range w.lines {
		if strings.Contains(l, want) {
			return l
		}
	}
	t.Fatalf("the watch ended without printing %q (stderr %q)", want, w.stderr.String())
	return ""
}

// exit waits for the command and returns its exit status.
func (w *watcher) exit(t *testing.T) int {
	t.Helper()
	for range w.lines {
	}
	err := w.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// work list --watch --json prints one Work per line: the listing, a Work
// created after it, that Work again as it runs and ends; Ctrl-C exits
// 130. executions list --watch ends with exit 1 when the daemon stops.
// (And runs list -o wide, on the same history.)
func TestWatchFollowsAListUntilCtrlCOrTheDaemonEnds(t *testing.T) {
	e := newEnv(t)
	d := e.start()
	before := e.createWork("setup")
	e.waitWork(before.ID, "terminal", func(w work) bool { return terminal(w.State) })
	w := e.watch("work", "list", "--watch", "--json")
	var first work
	if err := json.Unmarshal([]byte(w.next(t, before.ID)), &first); err != nil || first.State != "succeeded" {
		t.Fatalf("the listing's line: %+v %v", first, err)
	}
	keys := func(line string) string {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not one JSON object per line: %q", line)
		}
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return strings.Join(ks, ",")
	}
	created := e.createWork("setup")
	var states []string
	for {
		line := w.next(t, created.ID)
		var x work
		json.Unmarshal([]byte(line), &x)
		states = append(states, x.State)
		if terminal(x.State) {
			// The line has the shape of the list's item.
			var p struct{ Items []json.RawMessage }
			e.cliJSON(&p, "work", "list")
			for _, it := range p.Items {
				if strings.Contains(string(it), created.ID) && keys(string(it)) != keys(line) {
					t.Errorf("a watch line's members %s, the list item's %s", keys(line), keys(string(it)))
				}
			}
			break
		}
	}
	if states[len(states)-1] != "succeeded" {
		t.Errorf("the Work's lines went %v, want its newest state succeeded last", states)
	}
	if err := w.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := w.exit(t); code != 130 {
		t.Errorf("work list --watch after Ctrl-C: exit %d, want 130 (stderr %q)", code, w.stderr.String())
	}

	// runs list -o wide adds runs table's columns after its own.
	code, out, errs := e.cli("runs", "list", "-o", "wide")
	if header, _, _ := strings.Cut(out, "\n"); code != 0 || !strings.HasPrefix(header, "EXECUTION") || !strings.Contains(header, "EXECUTOR") ||
		!strings.HasSuffix(strings.TrimSpace(header), "OUTCOME") || !strings.Contains(out, created.ID) {
		t.Errorf("runs list -o wide: exit %d %q %q", code, out, errs)
	}

	x := e.watch("executions", "list", "-w")
	x.next(t, "ID") // the table's header: the listing is printed
	if code := d.stop(); code != 0 {
		t.Fatalf("daemon stop: exit %d", code)
	}
	if code := x.exit(t); code != 1 || !strings.Contains(x.stderr.String(), "cannot reach the daemon") {
		t.Errorf("executions list -w after the daemon stopped: exit %d, stderr %q", code, x.stderr.String())
	}
}

// jsonShape is what stays the same of a command's JSON whatever its
// flags: its members (but next_cursor, which only says there is more),
// and the members of the items of each list in it (none known for an
// empty list).
type jsonShape struct {
	members string
	items   map[string]string
}

func shape(t *testing.T, out string) jsonShape {
	t.Helper()
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("not one JSON object: %q", out)
	}
	sh := jsonShape{items: map[string]string{}}
	var ks []string
	for k, v := range doc {
		if k == "next_cursor" {
			continue
		}
		ks = append(ks, k)
		var items []map[string]json.RawMessage
		if json.Unmarshal(v, &items) == nil && len(items) > 0 {
			var iks []string
			for _, it := range items {
				for ik := range it {
					if !slices.Contains(iks, ik) {
						iks = append(iks, ik)
					}
				}
			}
			slices.Sort(iks)
			sh.items[k] = strings.Join(iks, " ")
		}
	}
	slices.Sort(ks)
	sh.members = strings.Join(ks, " ")
	return sh
}

// same reports whether two shapes agree: the same members, and the same
// item members in each list both have items in.
func (a jsonShape) same(b jsonShape) bool {
	if a.members != b.members {
		return false
	}
	for k, v := range a.items {
		if w, ok := b.items[k]; ok && w != v {
			return false
		}
	}
	return true
}

// Every command with --json prints one JSON shape whatever else its flags
// ask: each pair below runs a command with and without a flag that
// changes what it does (follow, page, filter, wait) and compares the
// members printed.
func TestOneJSONShapePerCommandWhateverItsFlags(t *testing.T) {
	e := newEnv(t)
	e.start()
	w := e.createWork("setup")
	e.waitWork(w.ID, "terminal", func(w work) bool { return terminal(w.State) })
	e.createWork("setup")
	until(t, "both Work finished", func() bool {
		var p page[work]
		e.must("GET", "/v1/work?scope=setup", nil, nil, &p)
		return len(p.Items) == 2 && terminal(p.Items[0].State) && terminal(p.Items[1].State)
	})
	cfg := e.file("cfg.json", withSecret)
	var cur struct {
		Config json.RawMessage `json:"config"`
	}
	e.cliJSON(&cur, "config", "get")
	active := e.file("active.json", string(cur.Config))
	for _, tc := range []struct {
		name string
		a, b []string
		// code is the exit status both must have.
		code int
	}{
		{"work create --wait", []string{"work", "create", "--scope", "setup"}, []string{"work", "create", "--scope", "setup", "--wait"}, 0},
		{"work list --all", []string{"work", "list"}, []string{"work", "list", "--all", "--limit", "1"}, 0},
		{"work list --since --reverse", []string{"work", "list"}, []string{"work", "list", "--since", "1h", "--reverse"}, 0},
		{"work get -o json", []string{"work", "get", w.ID}, []string{"work", "get", w.ID, "-o", "json"}, 0},
		{"events list --all", []string{"events", "list", "--scope", "setup"}, []string{"events", "list", "--scope", "setup", "--all", "--limit", "2"}, 0},
		{"executions list --since", []string{"executions", "list"}, []string{"executions", "list", "--since", "1h"}, 0},
		{"waits --all", []string{"waits"}, []string{"waits", "list", "--all"}, 0},
		{"runs list --state", []string{"runs", "list"}, []string{"runs", "list", "--state", "succeeded", "--since", "1h"}, 0},
		{"runs table", []string{"runs", "list"}, []string{"runs", "table"}, 0},
		{"artifacts list --work", []string{"artifacts", "list"}, []string{"artifacts", "list", "--work", w.ID}, 0},
		{"auth operators --all", []string{"auth", "operators"}, []string{"auth", "operators", "--all"}, 0},
		{"health --wait-ready", []string{"health"}, []string{"health", "--wait-ready", "30s"}, 0},
		{"doctor --offline", []string{"doctor"}, []string{"doctor", "--offline"}, -1},
		{"config validate --json vs config check", []string{"config", "validate", cfg}, []string{"config", "check", cfg}, 0},
		{"config apply --expected-generation", []string{"config", "apply", active}, []string{"config", "apply", active, "--expected-generation", "1"}, 0},
		{"config diff identical vs different", []string{"config", "diff", active}, []string{"config", "diff", cfg}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ca, outA, errA := e.cli(append(tc.a, "--json")...)
			cb, outB, errB := e.cli(append(tc.b, "--json")...)
			if tc.code >= 0 && (ca != tc.code || cb != tc.code) {
				t.Fatalf("exit %d (%s) and %d (%s), want %d", ca, errA, cb, errB, tc.code)
			}
			if sa, sb := shape(t, outA), shape(t, outB); !sa.same(sb) {
				t.Errorf("%v --json: %+v\n%v --json: %+v", tc.a, sa, tc.b, sb)
			}
		})
	}
}
