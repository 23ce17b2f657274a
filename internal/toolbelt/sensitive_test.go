package toolbelt_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/management"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
	"github.com/open-conduit/open-conduit/internal/runs"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
	"github.com/open-conduit/open-conduit/internal/toolbelt/toolbelttest"
	"github.com/open-conduit/open-conduit/osclient"
)

// secretHandler answers a credential unique to each of its runs and
// counts them; an input holding "refuse" is refused with its own code.
type secretHandler struct {
	mu   sync.Mutex
	runs int
}

func (h *secretHandler) serve(_ context.Context, _ extension.Authority, in json.RawMessage) (json.RawMessage, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.runs++
	if bytes.Contains(in, []byte("refuse")) {
		return nil, &extension.OperationError{Code: "no_credential", Message: fmt.Sprintf("refusal %d", h.runs)}
	}
	return json.Marshal(map[string]string{"username": "x-access-token", "password": fmt.Sprintf("ghs_sensitive_%d", h.runs)})
}

func (h *secretHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.runs
}

// TestToolbeltSensitiveRequestRecord: a sensitive operation's request
// record is withheld (the input's hash, no result, no refusal), every
// repeat runs the handler again (a refusal too), and a result an earlier
// release stored for it is never handed out.
func TestToolbeltSensitiveRequestRecord(t *testing.T) {
	f := fixture(t, false)
	ctx := context.Background()
	h := &secretHandler{}
	err := f.Register(extension.Registration{Name: "acme", Operations: []extension.Operation{
		{Name: "acme.credential", Summary: "A git credential.", Capabilities: []string{extension.CapabilityGitCredential}, Handler: h.serve},
	}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := f.Start()
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.Call(a.Token, "acme.credential", `{"host":"example.test"}`, "r1")
	if err != nil || res.Replayed || !strings.Contains(string(res.Result), "ghs_sensitive_1") {
		t.Fatalf("first call = %s replayed %v (%v)", res.Result, res.Replayed, err)
	}
	rp, err := f.Env.Store.GetReplay(ctx, a.Execution.ID, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if !rp.Withheld || rp.State != storage.ReplayDone || rp.Result != nil || rp.ErrorCode != "" || rp.InputHash == "" || rp.Operation != "acme.credential" {
		t.Fatalf("the request record is %+v; want it done and withheld, with the input's hash and no result", rp)
	}

	// A refusal is not stored either: the repeat asks the handler again.
	for i := 2; i <= 3; i++ {
		_, err := f.Call(a.Token, "acme.credential", `{"refuse":true}`, "r2")
		var oe *extension.OperationError
		if !errors.As(err, &oe) || oe.Code != "no_credential" || oe.Message != fmt.Sprintf("refusal %d", i) || h.count() != i {
			t.Fatalf("refusal %d: %v after %d runs; want the handler's own refusal of this run", i, err, h.count())
		}
	}
	if rp, err := f.Env.Store.GetReplay(ctx, a.Execution.ID, "r2"); err != nil || !rp.Withheld || rp.ErrorCode != "" || rp.ErrorMessage != "" {
		t.Fatalf("the refused request's record is %+v (%v); want it withheld without the refusal", rp, err)
	}

	// A record an earlier release stored with its result is never replayed
	// for a sensitive operation.
	sum := sha256.Sum256([]byte(`{}`))
	now := f.Env.Clock.Now()
	err = f.Env.Store.WithTx(ctx, func(tx storage.Tx) error {
		return tx.InsertReplay(ctx, &storage.Replay{
			Execution: a.Execution.ID, RequestID: "old", Operation: "acme.credential", InputHash: hex.EncodeToString(sum[:]),
			State: storage.ReplayDone, Result: json.RawMessage(`{"password":"stored-by-an-earlier-release"}`), CreatedAt: now, UpdatedAt: now,
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err = f.Call(a.Token, "acme.credential", `{}`, "old")
	if err != nil || res.Replayed || strings.Contains(string(res.Result), "earlier") || h.count() != 4 {
		t.Fatalf("a stored record of a sensitive operation = %s replayed %v after %d runs (%v); want the handler run again", res.Result, res.Replayed, h.count(), err)
	}

	// The store refuses a withheld record that carries a result.
	err = f.Env.Store.WithTx(ctx, func(tx storage.Tx) error {
		return tx.InsertReplay(ctx, &storage.Replay{
			Execution: a.Execution.ID, RequestID: "bad", Operation: "acme.credential", InputHash: "h",
			State: storage.ReplayDone, Withheld: true, Result: json.RawMessage(`{"password":"x"}`), CreatedAt: now, UpdatedAt: now,
		})
	})
	if err == nil {
		t.Fatal("the store accepted a withheld record carrying a result")
	}
}

// TestToolbeltSensitiveNeedsHandler: a sensitive operation served by a
// translated emission is refused at registration, whether it says
// Sensitive or serves git.credential.
func TestToolbeltSensitiveNeedsHandler(t *testing.T) {
	f := fixture(t, false)
	tr := func(context.Context, extension.Authority, json.RawMessage) (extension.Emission, error) {
		return extension.Emission{Type: "acme.x"}, nil
	}
	for _, op := range []extension.Operation{
		{Name: "acme.secret", Summary: "S.", Sensitive: true, Emit: tr},
		{Name: "acme.secret", Summary: "S.", Capabilities: []string{extension.CapabilityGitCredential}, Emit: tr},
	} {
		if err := f.Register(extension.Registration{Name: "acme", Operations: []extension.Operation{op}}); !errors.Is(err, extension.ErrInvalid) {
			t.Errorf("a sensitive translated operation (%+v): %v, want ErrInvalid", op.Capabilities, err)
		}
	}
}

// TestToolbeltConcurrentDuplicate: a second call with the request ID of a
// call still running waits for it. For a sensitive operation it then runs
// the handler itself (never concurrently with the first) and answers its
// own result; for a plain one it replays the first's.
func TestToolbeltConcurrentDuplicate(t *testing.T) {
	for _, sensitive := range []bool{true, false} {
		t.Run(fmt.Sprintf("sensitive=%v", sensitive), func(t *testing.T) {
			f := fixture(t, false)
			var mu sync.Mutex
			runs, running, most := 0, 0, 0
			entered, release := make(chan struct{}), make(chan struct{})
			h := func(_ context.Context, _ extension.Authority, _ json.RawMessage) (json.RawMessage, error) {
				mu.Lock()
				runs++
				n := runs
				running++
				most = max(most, running)
				mu.Unlock()
				if n == 1 {
					close(entered)
					<-release
				}
				mu.Lock()
				running--
				mu.Unlock()
				return json.Marshal(map[string]string{"password": fmt.Sprintf("run-%d", n)})
			}
			err := f.Register(extension.Registration{Name: "acme", Operations: []extension.Operation{
				{Name: "acme.secret", Summary: "S.", Sensitive: sensitive, Handler: h},
			}})
			if err != nil {
				t.Fatal(err)
			}
			waiting := make(chan struct{}, 1)
			toolbelt.SetFlightWaitHook(f.TB.(*toolbelt.Toolbelt), func() { waiting <- struct{}{} })
			a, err := f.Start()
			if err != nil {
				t.Fatal(err)
			}
			type answer struct {
				res extension.CallResult
				err error
			}
			call := func(out chan<- answer) {
				res, err := f.Call(a.Token, "acme.secret", `{}`, "dup")
				out <- answer{res, err}
			}
			first, second := make(chan answer, 1), make(chan answer, 1)
			go call(first)
			guard := time.After(30 * time.Second) // a failure guard only
			select {
			case <-entered:
			case <-guard:
				t.Fatal("the first call's handler never ran")
			}
			go call(second)
			select {
			case <-waiting:
			case <-guard:
				t.Fatal("the duplicate never waited for the running call")
			}
			close(release)
			one, two := <-first, <-second
			if one.err != nil || two.err != nil {
				t.Fatalf("calls: %v, %v", one.err, two.err)
			}
			if string(one.res.Result) != `{"password":"run-1"}` || one.res.Replayed {
				t.Fatalf("first call = %s replayed %v", one.res.Result, one.res.Replayed)
			}
			mu.Lock()
			defer mu.Unlock()
			if most != 1 {
				t.Fatalf("%d handler runs overlapped", most)
			}
			if sensitive {
				if runs != 2 || two.res.Replayed || string(two.res.Result) != `{"password":"run-2"}` {
					t.Fatalf("the duplicate of a sensitive call = %s replayed %v after %d runs; want its own run", two.res.Result, two.res.Replayed, runs)
				}
			} else if runs != 1 || !two.res.Replayed || string(two.res.Result) != `{"password":"run-1"}` {
				t.Fatalf("the duplicate of a plain call = %s replayed %v after %d runs; want the first's result replayed", two.res.Result, two.res.Replayed, runs)
			}
		})
	}
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// canary stands for a credential in an extension's error text.
const canary = "canary-5f3e-password=hunter2"

// TestToolbeltExtensionErrorTextNeverLogged: the text of a handler's,
// translator's or gate's error that is not an OperationError (or the
// value of its panic) reaches neither the toolbelt's log nor the answer,
// on the toolbelt itself and through the execution socket (its 500 and
// the server's log); the error's Go type is logged instead. The host's
// own refusals are still logged with their reasons.
func TestToolbeltExtensionErrorTextNeverLogged(t *testing.T) {
	tbLog, srvLog := &syncBuffer{}, &syncBuffer{}
	h := toolbelttest.Harness{Name: "logged", New: func(env *toolbelttest.Env) (toolbelttest.Toolbelt, error) {
		o := env.Options()
		o.Logger = slog.New(slog.NewJSONHandler(tbLog, nil))
		return toolbelt.New(o)
	}}
	f, err := toolbelttest.NewFixture(t.TempDir(), h, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	err = f.Register(extension.Registration{Name: "acme", Operations: []extension.Operation{
		handlerOp("acme.count", func(context.Context, extension.Authority, json.RawMessage) (json.RawMessage, error) {
			return nil, errors.New(canary)
		}),
		handlerOp("acme.echo", func(context.Context, extension.Authority, json.RawMessage) (json.RawMessage, error) {
			panic(canary)
		}),
		handlerOp("acme.secret", okHandler),
		{Name: "acme.plain", Summary: "Translate.", Emit: func(context.Context, extension.Authority, json.RawMessage) (extension.Emission, error) {
			return extension.Emission{}, fmt.Errorf("translate %s: %w", canary, context.DeadlineExceeded)
		}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	err = f.Register(extension.Registration{Name: "human", Gate: extension.GateFunc(func(_ context.Context, req extension.GateRequest) (*extension.WaitPlan, error) {
		switch {
		case strings.Contains(string(req.Input), "gate-error"):
			return nil, errors.New(canary)
		case strings.Contains(string(req.Input), "gate-panic"):
			panic(canary)
		}
		return nil, nil
	})})
	if err != nil {
		t.Fatal(err)
	}
	a, err := f.Start()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ op, in, typ string }{
		{"acme.count", `{}`, "*errors.errorString"},
		{"acme.echo", `{}`, "panic(string)"},
		{"acme.plain", `{}`, "*fmt.wrapError"},
		{"acme.secret", `{"x":"gate-error"}`, "*errors.errorString"},
		{"acme.secret", `{"x":"gate-panic"}`, "panic(string)"},
	} {
		before := len(tbLog.String())
		_, err := f.Call(a.Token, c.op, c.in, "")
		if err == nil {
			t.Fatalf("%s %s succeeded", c.op, c.in)
		}
		if strings.Contains(err.Error(), canary) || strings.Contains(fmt.Sprintf("%+v", err), canary) {
			t.Errorf("%s %s: the answer holds the extension's error text: %v", c.op, c.in, err)
		}
		if got := tbLog.String()[before:]; !strings.Contains(got, c.typ) {
			t.Errorf("%s %s: the log names no error type %s:\n%s", c.op, c.in, c.typ, got)
		}
	}

	// Through the execution socket: the 500's body and the server's log.
	srv := mgmttest.Start(t, mgmttest.Options{ExecutionTokens: management.ToolbeltTokens(f.TB.(*toolbelt.Toolbelt)), Clock: f.Env.Clock,
		Logger: slog.New(slog.NewJSONHandler(srvLog, nil))})
	dirs, err := runs.New(srv.StateDir, runs.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dirs.CloseAll)
	ep, err := dirs.Prepare(a.Execution.ID, a.Token)
	if err != nil {
		t.Fatal(err)
	}
	if err := dirs.Serve(a.Execution.ID, ep, srv.Server.ExecutionHandler(f.TB)); err != nil {
		t.Fatal(err)
	}
	c, err := osclient.New(ep.Socket, ep.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	_, err = c.Call(context.Background(), osclient.CallRequest{Operation: "acme.count", Input: json.RawMessage(`{}`)})
	if osclient.CodeOf(err) != "internal" || strings.Contains(err.Error(), canary) {
		t.Fatalf("a failing handler through the socket: %v; want internal without its text", err)
	}
	if !strings.Contains(srvLog.String(), "*errors.errorString") {
		t.Errorf("the server's 500 log names no error type:\n%s", srvLog.String())
	}

	// The host's own refusals keep their reasons.
	if _, err := f.Call(a.Token, "acme.nothing", `{}`, ""); !errors.Is(err, extension.ErrForbidden) {
		t.Fatalf("an undeclared operation: %v", err)
	}
	if !strings.Contains(tbLog.String(), `is not declared on this toolbelt`) {
		t.Errorf("the host's own refusal lost its reason:\n%s", tbLog.String())
	}
	for name, log := range map[string]string{"toolbelt": tbLog.String(), "server": srvLog.String()} {
		if strings.Contains(log, canary) || strings.Contains(log, "hunter2") {
			t.Errorf("the %s log holds an extension's error text:\n%s", name, log)
		}
	}
}
