package pkgproto_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/packages"
	"github.com/open-conduit/open-conduit/internal/packages/pkgproto"
)

// gopkg builds the test package written on the Go SDK into a package
// directory of its own and answers it as installed, every permission
// accepted.
func gopkg(t *testing.T) packages.Installed {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool is not on PATH: %v", err)
	}
	dir := t.TempDir()
	build := exec.Command(goTool, "build", "-o", filepath.Join(dir, "gopkg"), "./testdata/gopkg")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "look.md"), []byte("---\noperations: [gopkg.hello]\n---\n# Look\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	perms := []string{packages.PermissionOperationGate, packages.PermissionStartGate, packages.PermissionEmit, packages.PermissionExecutor}
	return packages.Installed{Dir: dir, Digest: "sha256:test", Accepted: perms, Manifest: packages.Manifest{
		Name: "gopkg", Version: "0.1.0", Run: packages.Run{Command: []string{"./gopkg"}},
		Permissions: perms,
		Provides: packages.Provides{
			Operations: []packages.Operation{
				{Name: "gopkg.hello", Summary: "Say hello."},
				{Name: "gopkg.note", Summary: "Note something.", Kind: packages.OperationEmit},
				{Name: "gopkg.hold", Summary: "Hold on.", Kind: packages.OperationWait},
				{Name: "gopkg.block", Summary: "Never answer."},
			},
			OperationGate: true,
			StartGate:     true,
			Executors:     []packages.Executor{{Kind: "marker", Toolbelt: true, Resume: true, Playbook: "look"}},
			Playbooks:     []packages.Playbook{{Name: "look", File: "look.md"}},
		},
	}}
}

func operation(t *testing.T, reg extension.Registration, name string) extension.Operation {
	t.Helper()
	for _, op := range reg.Operations {
		if op.Name == name {
			return op
		}
	}
	t.Fatalf("no operation %s", name)
	return extension.Operation{}
}

func TestGoPackageOperations(t *testing.T) {
	h := newHarness()
	inst := h.start(t, gopkg(t))
	reg := inst.Registration()
	if len(reg.Playbooks) != 1 || reg.Playbooks[0].Name != "look" || !strings.Contains(reg.Playbooks[0].Markdown, "# Look") {
		t.Fatalf("playbooks = %+v", reg.Playbooks)
	}
	out, err := operation(t, reg, "gopkg.hello").Handler(context.Background(), auth("gopkg.hello", `{"greeting":"hey"}`), json.RawMessage(`{"name":"ada"}`))
	if err != nil || string(out) != `{"config":{"greeting":"hey"},"hello":"ada","request_id":"r-1"}` {
		t.Fatalf("hello = %s, %v", out, err)
	}
	_, err = operation(t, reg, "gopkg.hello").Handler(context.Background(), auth("gopkg.hello", `{}`), json.RawMessage(`{}`))
	var oe *extension.OperationError
	if !errors.As(err, &oe) || oe.Code != "no_name" || oe.Message != "give a name" {
		t.Fatalf("refusal = %v", err)
	}
	em, err := operation(t, reg, "gopkg.note").Emit(context.Background(), auth("gopkg.note", `{}`), json.RawMessage(`{"n":1}`))
	if err != nil || em.Type != "gopkg.noted" || string(em.Data) != `{"n":1}` || em.CorrelationKey != "wrk_1" {
		t.Fatalf("emission = %+v, %v", em, err)
	}
	plan, err := operation(t, reg, "gopkg.hold").Wait(context.Background(), auth("gopkg.hold", `{}`), json.RawMessage(`{}`))
	if err != nil || !slices.Equal(plan.Types, []string{"gopkg.done"}) || plan.Timeout != 90*time.Second || string(plan.Output) != `{"holding":true}` {
		t.Fatalf("plan = %+v, %v", plan, err)
	}
}

// A call whose caller goes is cancelled in the package too, and the
// package goes on answering others.
func TestGoPackageCancelledCall(t *testing.T) {
	h := newHarness()
	reg := h.start(t, gopkg(t)).Registration()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := operation(t, reg, "gopkg.block").Handler(ctx, auth("gopkg.block", `{}`), json.RawMessage(`{}`))
		done <- err
	}()
	eventually(t, "the call's timeout to be set", func() bool { return h.timers.has(callTimeout) })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call = %v", err)
	}
	if _, err := operation(t, reg, "gopkg.hello").Handler(context.Background(), auth("gopkg.hello", `{}`), json.RawMessage(`{"name":"b"}`)); err != nil {
		t.Fatal(err)
	}
}

func TestGoPackageGates(t *testing.T) {
	h := newHarness()
	reg := h.start(t, gopkg(t)).Registration()
	ask := func(op string) (*extension.WaitPlan, error) {
		return reg.Gate.Check(context.Background(), extension.GateRequest{Authority: auth(op, `{}`), Operation: op, Input: json.RawMessage(`{}`)})
	}
	if plan, err := ask("other.go"); plan != nil || err != nil {
		t.Fatalf("allow = %+v, %v", plan, err)
	}
	if plan, err := ask("other.park"); err != nil || plan == nil || string(plan.Output) != `{"parked":true}` || !slices.Equal(plan.Keys, []string{"exe_1"}) {
		t.Fatalf("park = %+v, %v", plan, err)
	}
	var oe *extension.OperationError
	if _, err := ask("other.refuse"); !errors.As(err, &oe) || oe.Code != "no" {
		t.Fatalf("refuse = %v", err)
	}
	// An error without a verdict crosses as an internal error, its text
	// left behind: the host fails closed.
	_, err := ask("other.fail")
	var re *pkgproto.RemoteError
	if !errors.As(err, &re) || errors.As(err, &oe) || strings.Contains(err.Error(), "must not cross") {
		t.Fatalf("failure = %v (%T)", err, err)
	}
	plan, err := reg.StartGate.AllowStart(context.Background(), extension.StartRequest{Scope: "default", Work: "wrk_2", Binding: "held",
		Inputs: []extension.StartInput{{ID: "evt_1", Type: "core.manual"}}})
	if err != nil || plan == nil || plan.Reason != "held with 1 inputs" || !slices.Equal(plan.Keys, []string{"wrk_2"}) {
		t.Fatalf("start gate = %+v, %v", plan, err)
	}
	if plan, err := reg.StartGate.AllowStart(context.Background(), extension.StartRequest{Binding: "free"}); plan != nil || err != nil {
		t.Fatalf("start gate allow = %+v, %v", plan, err)
	}
	if err := reg.CheckConfig(json.RawMessage(`{"greeting":"x"}`)); err != nil {
		t.Fatal(err)
	}
	var ce *extension.ConfigError
	if err := reg.CheckConfig(json.RawMessage(`{"colour":"x"}`)); !errors.As(err, &ce) || ce.Problems[0].Code != "unknown_field" {
		t.Fatalf("config check = %v", err)
	}
}

// A manifest executor with "dir": false is a Dirless executor.
func TestGoPackageExecutorWithoutDir(t *testing.T) {
	h := newHarness()
	inst := gopkg(t)
	no := false
	inst.Manifest.Provides.Executors[0].Dir = &no
	xs := h.start(t, inst).Executors()
	if len(xs) != 1 || !xs[0].Info().Dirless {
		t.Fatalf("executors = %v; want one Dirless executor", xs)
	}
}

func TestGoPackageExecutor(t *testing.T) {
	h := newHarness()
	xs := h.start(t, gopkg(t)).Executors()
	if len(xs) != 1 {
		t.Fatalf("executors = %v", xs)
	}
	x := xs[0]
	info := x.Info()
	if info.Name != "gopkg.marker" || info.Transport != executor.TransportOS || !info.Has(executor.CapResume) || !info.Has(executor.CapToolbelt) || info.Dirless {
		t.Fatalf("info = %+v", info)
	}
	if pn, ok := x.(extension.PlaybookNamer); !ok || pn.PlaybookName(nil) != "look" {
		t.Fatal("the executor does not name its playbook")
	}
	dir := t.TempDir()
	req := executor.RunRequest{ExecutionID: "exe_9", WorkID: "wrk_9", ScopeID: "default", BindingID: "b", Epoch: 3, Dir: dir,
		Config: json.RawMessage(`{"x":1}`), Env: map[string]string{"K": "v"}, Deadline: time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC),
		Context: executor.ExecutionContext{Token: "the-token-itself", ToolbeltEndpoint: "/run/tb.sock", ToolbeltTokenFile: "/run/token",
			ToolbeltDir: "/opt/bin", PlaybookDir: "/state/playbooks"},
		Events: []executor.Event{{ID: "evt_1", Seq: 4, Type: "core.manual", Source: "core.manual", Scope: "default", Data: json.RawMessage(`{"a":1}`)}}}
	res, err := x.Run(context.Background(), req)
	if err != nil || res.Outcome != executor.Succeeded || res.Session != "s-exe_9" || res.Usage == nil || res.Usage.Turns != 1 {
		t.Fatalf("run = %+v, %v", res, err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "request.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "the-token-itself") {
		t.Fatal("the token crossed the protocol")
	}
	for _, want := range []string{`"toolbelt_token_file":"/run/token"`, `"toolbelt_dir":"/opt/bin"`, `"playbook_dir":"/state/playbooks"`,
		`"toolbelt_endpoint":"/run/tb.sock"`, `"env":{"K":"v"}`, `"deadline":"2026-12-01T13:00:00Z"`, `"seq":4`} {
		if !strings.Contains(string(raw), want) {
			t.Fatalf("the run request lacks %s: %s", want, raw)
		}
	}
	if _, err := x.Recover(context.Background(), req); !errors.Is(err, executor.ErrGone) {
		t.Fatalf("recover = %v", err)
	}
	req.Session = "s-exe_9"
	if res, err := x.Resume(context.Background(), req); err != nil || res.Session != "s-exe_9" {
		t.Fatalf("resume = %+v, %v", res, err)
	}
	if err := x.Stop(context.Background(), req, time.Second); err != nil {
		t.Fatal(err)
	}
}
