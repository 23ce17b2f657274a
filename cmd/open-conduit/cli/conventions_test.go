package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/open-conduit/open-conduit/internal/ids"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
	"github.com/open-conduit/open-conduit/internal/storage"

	"github.com/open-conduit/open-conduit/internal/management"
)

// envelope decodes the JSON error envelope a failure prints with --json.
func envelope(t *testing.T, stderr string) (code, message string) {
	t.Helper()
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	dec := json.NewDecoder(strings.NewReader(stderr))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || dec.More() || e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("stderr is not one error envelope (%v): %q", err, stderr)
	}
	return e.Error.Code, e.Error.Message
}

// A request the daemon refuses as invalid exits 2, as a usage error the
// CLI finds itself does; a refusal of another kind exits 1.
func TestDaemonUsageErrorsExit2(t *testing.T) {
	serveStack(t)
	for _, args := range [][]string{
		{"work", "list", "--limit", "501"},
		{"work", "list", "--state", "sleeping"},
		{"events", "list", "--limit", "0x"},
		{"emit", "core.manual", "--scope", "setup"},
	} {
		code, _, errs := run(t, args...)
		if code != ExitUsage {
			t.Errorf("%v: exit %d (%q), want 2", args, code, errs)
		}
	}
	if code, _, errs := run(t, "work", "list", "--limit", "501"); !strings.Contains(errs, "invalid_request") {
		t.Errorf("--limit 501: exit %d, %q does not name invalid_request", code, errs)
	}
	if code, _, errs := run(t, "work", "get", "wrk_nope"); code != ExitFailed {
		t.Errorf("missing Work: exit %d (%q), want 1", code, errs)
	}
}

// A role refusal names the code, the role needed and the command, never
// the HTTP route.
func TestForbiddenRoleNamesTheCommand(t *testing.T) {
	h := serveStack(t)
	file, _ := h.AddOperator(t, "viewer", management.RoleView)
	code, _, errs := run(t, "--token-file", file, "work", "cancel", "wrk_x")
	if code != ExitFailed || !strings.Contains(errs, "forbidden_role") || !strings.Contains(errs, "`open-conduit work cancel` needs the operate role") ||
		!strings.Contains(errs, "role is view") || strings.Contains(errs, "/v1/") {
		t.Errorf("role refusal: exit %d, %q", code, errs)
	}
	code, out, errs := run(t, "--token-file", file, "work", "cancel", "wrk_x", "--json")
	if c, msg := envelope(t, errs); code != ExitFailed || out != "" || c != "forbidden_role" || !strings.Contains(msg, "operate") || strings.HasPrefix(msg, "forbidden_role") {
		t.Errorf("role refusal with --json: exit %d, %q %q", code, out, errs)
	}
}

// With --json every failure is the error envelope on stderr, with the
// exit status it has without --json.
func TestJSONErrors(t *testing.T) {
	serveStack(t)
	cases := []struct {
		args []string
		exit int
		code string
	}{
		{[]string{"work", "list", "--limit", "501", "--json"}, ExitUsage, "invalid_request"},
		{[]string{"work", "get", "wrk_nope", "--json"}, ExitFailed, "not_found"},
		{[]string{"work", "create", "--json"}, ExitUsage, "usage"},
		{[]string{"work", "list", "--json", "--bogus"}, ExitUsage, "usage"},
		{[]string{"work", "get", "--json"}, ExitUsage, "usage"},
		{[]string{"work", "get", "wrk_nope", "--json", "--endpoint", filepath.Join(t.TempDir(), "none.sock")}, ExitFailed, "unreachable"},
	}
	for _, tc := range cases {
		code, out, errs := run(t, tc.args...)
		if code != tc.exit || out != "" {
			t.Errorf("%v: exit %d, stdout %q; want %d and nothing", tc.args, code, out, tc.exit)
			continue
		}
		if c, _ := envelope(t, errs); c != tc.code {
			t.Errorf("%v: code %q, want %q", tc.args, c, tc.code)
		}
		// The same failure without --json exits the same.
		var plain []string
		for _, a := range tc.args {
			if a != "--json" {
				plain = append(plain, a)
			}
		}
		if code, _, errs := run(t, plain...); code != tc.exit || strings.HasPrefix(errs, "{") {
			t.Errorf("%v: exit %d %q without --json", plain, code, errs)
		}
	}
}

// work create prints one JSON shape whether or not --wait follows the
// Work: the create's answer, with the final Work in it after --wait, and
// a failed Work's envelope on stderr.
func TestWorkCreateJSONShape(t *testing.T) {
	s := serveStack(t)
	defer func(d time.Duration) { waitInterval = d }(waitInterval)
	waitInterval = 5 * time.Millisecond
	ctx := context.Background()
	members := func(out string) (map[string]json.RawMessage, string) {
		t.Helper()
		var doc map[string]json.RawMessage
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("not JSON: %q", out)
		}
		var keys []string
		for k := range doc {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return doc, strings.Join(keys, ",")
	}
	first, plain := members(mustRun(t, 0, "work", "create", "--scope", "setup", "--json"))
	var fw struct{ ID string }
	json.Unmarshal(first["work"], &fw)
	finish := func(id string) {
		t.Helper()
		if err := s.Store.WithTx(ctx, func(tx storage.Tx) error {
			_, _, err := s.Runtime.FinishWorkInTx(ctx, tx, id, kernel.Finish{State: storage.WorkFailed, Message: "exit status 3"})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	finish(fw.ID) // so that the next ready Work is --wait's

	before := countWork(t, s)
	var wg sync.WaitGroup
	var code int
	var out, errs bytes.Buffer
	wg.Go(func() {
		code = Main(ctx, []string{"work", "create", "--scope", "setup", "--json", "--wait"}, Streams{In: strings.NewReader(""), Out: &out, Err: &errs})
	})
	finish(awaitNewWork(t, s, before))
	wg.Wait()
	doc, waited := members(out.String())
	if waited != plain || !strings.Contains(plain, "work") || !strings.Contains(plain, "created_event") {
		t.Errorf("--json --wait members %s, --json %s", waited, plain)
	}
	var w struct{ State string }
	json.Unmarshal(doc["work"], &w)
	if w.State != "failed" {
		t.Errorf("--wait's work is %s, want the final failed: %s", w.State, out.String())
	}
	if c, _ := envelope(t, errs.String()); code != ExitFailed || c != "work_failed" {
		t.Errorf("failed Work: exit %d, stderr %q", code, errs.String())
	}
}

// -o json is --json, -o name one id per line, -o wide the extra columns;
// -o yaml and an unknown format are usage errors.
func TestOutputFormats(t *testing.T) {
	serveStack(t)
	a := workID.FindString(mustRun(t, 0, "work", "create", "--scope", "setup"))
	b := workID.FindString(mustRun(t, 0, "work", "create", "--scope", "setup"))
	if got, want := mustRun(t, 0, "work", "list", "-o", "json"), mustRun(t, 0, "work", "list", "--json"); got != want {
		t.Errorf("-o json %q, --json %q", got, want)
	}
	names := strings.Fields(mustRun(t, 0, "work", "list", "-o", "name"))
	sort.Strings(names)
	ab := []string{a, b}
	sort.Strings(ab)
	if strings.Join(names, " ") != strings.Join(ab, " ") {
		t.Errorf("-o name listed %v, want %v", names, ab)
	}
	if out := mustRun(t, 0, "work", "get", a, "-o", "name"); out != a+"\n" {
		t.Errorf("get -o name said %q", out)
	}
	if out := mustRun(t, 0, "work", "get", a, "-o", "json"); !strings.HasPrefix(out, `{"id":"`+a) {
		t.Errorf("get -o json said %q", out)
	}
	wide := mustRun(t, 0, "work", "list", "-o", "wide")
	if !strings.Contains(wide, "CREATED EVENT") || !strings.Contains(wide, "UPDATED") || strings.Contains(mustRun(t, 0, "work", "list"), "CREATED EVENT") {
		t.Errorf("-o wide said %q", wide)
	}
	for _, args := range [][]string{{"events", "list", "-o", "wide"}, {"executions", "list", "-o", "wide"}, {"waits", "-o", "wide"}} {
		if out := mustRun(t, 0, args...); !strings.Contains(strings.SplitN(out, "\n", 2)[0], "SCOPE") {
			t.Errorf("%v said %q", args, out)
		}
	}
	for _, o := range []string{"yaml", "xml"} {
		code, out, errs := run(t, "work", "list", "-o", o)
		if code != ExitUsage || out != "" || !strings.Contains(errs, "-o") {
			t.Errorf("-o %s: exit %d %q %q", o, code, out, errs)
		}
	}
}

// The main lists run newest first; --reverse oldest first; --all follows
// the cursors to the end; --since stops at the first older item.
func TestListOrderAllAndSince(t *testing.T) {
	s := serveStack(t)
	var ids []string
	var second time.Time
	for i := range 4 {
		s.Clock.Advance(time.Minute)
		if i == 1 {
			second = s.Clock.Now()
		}
		ids = append(ids, workID.FindString(mustRun(t, 0, "work", "create", "--scope", "setup")))
	}
	names := func(args ...string) string {
		t.Helper()
		code, out, errs := run(t, append([]string{"work", "list", "-o", "name"}, args...)...)
		if code != 0 {
			t.Fatalf("work list %v: exit %d %q", args, code, errs)
		}
		return strings.Join(strings.Fields(out), " ")
	}
	newest := ids[3] + " " + ids[2] + " " + ids[1] + " " + ids[0]
	oldest := ids[0] + " " + ids[1] + " " + ids[2] + " " + ids[3]
	if got := names(); got != newest {
		t.Errorf("default order %s, want newest first %s", got, newest)
	}
	if got := names("--reverse"); got != oldest {
		t.Errorf("--reverse %s, want %s", got, oldest)
	}
	// One page of two, newest first, says where the next begins; --all
	// reads every page and prints no cursor.
	code, out, errs := run(t, "work", "list", "-o", "name", "--limit", "2")
	if code != 0 || strings.Join(strings.Fields(out), " ") != ids[3]+" "+ids[2] || !strings.Contains(errs, "--cursor") {
		t.Errorf("--limit 2: %d %q %q", code, out, errs)
	}
	m := regexp.MustCompile(`--cursor (\S+)`).FindStringSubmatch(errs)
	if m == nil {
		t.Fatalf("no cursor in %q", errs)
	}
	if got := names("--limit", "2", "--cursor", m[1]); got != ids[1]+" "+ids[0] {
		t.Errorf("second page %s", got)
	}
	code, out, errs = run(t, "work", "list", "-o", "name", "--limit", "1", "--all")
	if code != 0 || strings.Join(strings.Fields(out), " ") != newest || errs != "" {
		t.Errorf("--all: %d %q %q", code, out, errs)
	}
	if got := names("--limit", "1", "--all", "--reverse"); got != oldest {
		t.Errorf("--all --reverse %s", got)
	}
	var all struct{ Items []map[string]any }
	js := mustRun(t, 0, "work", "list", "--limit", "1", "--all", "--json")
	if err := json.Unmarshal([]byte(js), &all); err != nil || len(all.Items) != 4 || strings.Contains(js, "next_cursor") {
		t.Errorf("--all --json: %v %q", err, js)
	}
	since := second.UTC().Format(time.RFC3339Nano)
	if got := names("--since", since, "--limit", "1"); got != ids[3]+" "+ids[2]+" "+ids[1] {
		t.Errorf("--since %s: %s", since, got)
	}
	if got := names("--since", since, "--reverse"); got != ids[1]+" "+ids[2]+" "+ids[3] {
		t.Errorf("--since --reverse: %s", got)
	}
	if code, _, errs := run(t, "work", "list", "--since", "yesterday"); code != ExitUsage {
		t.Errorf("bad --since: exit %d %q", code, errs)
	}
	// The other main lists take the same flags, newest first.
	for _, args := range [][]string{{"events", "list"}, {"executions", "list"}, {"waits"}} {
		mustRun(t, 0, append(args, "--all", "--reverse", "--since", "1h")...)
	}
	var ev struct{ Items []struct{ Seq int64 } }
	json.Unmarshal([]byte(mustRun(t, 0, "events", "list", "--json")), &ev)
	if len(ev.Items) < 2 || ev.Items[0].Seq < ev.Items[1].Seq {
		t.Errorf("events are not newest first: %+v", ev.Items)
	}
}

// Every command's help has an example, and the examples name only
// commands that exist.
func TestEveryCommandHasAnExample(t *testing.T) {
	root := NewRoot(Streams{})
	seen := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		seen[c.CommandPath()] = true
		if !c.Hidden && !strings.Contains(c.Example, c.CommandPath()) {
			t.Errorf("%s has no example of itself: %q", c.CommandPath(), c.Example)
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	for p := range examples {
		if !seen[p] {
			t.Errorf("examples names %q, which is no command", p)
		}
	}
}

// The consistent verbs: executions cancel (execution cancel kept),
// waits list (waits kept), actions list (actions kept); a typo in a
// subcommand is a usage error that suggests the right one.
func TestVerbsAndSuggestions(t *testing.T) {
	serveStack(t)
	if a, b := mustRun(t, 0, "waits", "list"), mustRun(t, 0, "waits"); a != b || !strings.Contains(a, "TYPES") {
		t.Errorf("waits list %q, waits %q", a, b)
	}
	if a, b := mustRun(t, 0, "actions", "list"), mustRun(t, 0, "actions"); a != b || !strings.Contains(a, "SUMMARY") {
		t.Errorf("actions list %q, actions %q", a, b)
	}
	for _, verb := range []string{"executions", "execution"} {
		if out := mustRun(t, 1, verb, "cancel", "exe_nope"); !strings.Contains(out, "not_found") {
			t.Errorf("%s cancel of a missing execution said %q", verb, out)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"work", "lsit"}, `did you mean list`},
		{[]string{"executions", "cancle", "x"}, `did you mean cancel`},
		{[]string{"wrok"}, "work"},
	} {
		code, _, errs := run(t, tc.args...)
		if code != ExitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d %q, want 2 suggesting %q", tc.args, code, errs, tc.want)
		}
	}
}

// Shell completion: the script for each shell, and ids, scopes and
// bindings from the daemon.
func TestCompletion(t *testing.T) {
	serveStack(t)
	for _, sh := range []string{"bash", "zsh", "fish"} {
		if out := mustRun(t, 0, "completion", sh); !strings.Contains(out, "open-conduit") {
			t.Errorf("completion %s printed %q", sh, out)
		}
	}
	id := workID.FindString(mustRun(t, 0, "work", "create", "--scope", "setup"))
	if out := mustRun(t, 0, "__complete", "work", "cancel", ""); !strings.Contains(out, id+"\tready in setup") {
		t.Errorf("Work ids completed as %q", out)
	}
	if out := mustRun(t, 0, "__complete", "work", "create", "--scope", ""); !strings.Contains(out, "setup\n") {
		t.Errorf("scopes completed as %q", out)
	}
	if out := mustRun(t, 0, "__complete", "work", "create", "--scope", "setup", "--binding", ""); !strings.Contains(out, "shell\n") {
		t.Errorf("bindings completed as %q", out)
	}
}

// work create --wait follows its Work across a restart of the daemon: it
// reconnects when the socket answers again and reports the outcome.
func TestWorkCreateWaitSurvivesRestart(t *testing.T) {
	s := serveStack(t)
	defer func(d time.Duration) { waitInterval = d }(waitInterval)
	waitInterval = 5 * time.Millisecond
	ctx := context.Background()
	before := countWork(t, s)
	var wg sync.WaitGroup
	var code int
	var out, errs syncBuffer
	wg.Go(func() {
		code = Main(ctx, []string{"work", "create", "--scope", "setup", "--wait"}, Streams{In: strings.NewReader(""), Out: &out, Err: &errs})
	})
	id := awaitNewWork(t, s, before)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	// The command notices the daemon is gone before it comes back.
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(errs.String(), "reconnecting") {
		if time.Now().After(deadline) {
			t.Fatalf("the command did not notice the stop: %q", errs.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
	// A restarted daemon draws new ids (a seed of its own).
	again := mgmttest.StartStack(t, mgmttest.StackOptions{StateDir: s.StateDir, IDs: ids.NewGenerator(s.Clock, rand.NewChaCha8([32]byte{42}))})
	if err := again.Store.WithTx(ctx, func(tx storage.Tx) error {
		_, _, err := again.Runtime.FinishWorkInTx(ctx, tx, id, kernel.Finish{State: storage.WorkSucceeded, Message: "exit status 0"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if code != 0 || !strings.Contains(errs.String(), "reconnected") || !strings.Contains(out.String(), "succeeded") {
		t.Errorf("exit %d\nstdout %s\nstderr %s", code, out.String(), errs.String())
	}
}

// syncBuffer is a bytes.Buffer safe to read while a command writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
