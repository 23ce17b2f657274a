package toolbelttest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// Cases are the shared conformance cases: they apply to every harness, and
// under a scheduled driver the handshakes go on through Complete.
func Cases() []Case {
	return append([]Case{
		{"issue_on_claim_and_recovery_supersession", caseSupersession},
		{"digest_only_storage", caseDigestOnly},
		{"live_ceiling_narrowing", caseCeiling},
		{"revocation_by_id", caseRevocation},
		{"replay_and_conflict", caseReplay},
		{"handler_at_most_once", caseAtMostOnce},
		{"forged_source_and_correlation_refused", caseForgery},
		{"declared_wait_handshake", caseWaitHandshake},
		{"declared_outcome_handshake", caseOutcomeHandshake},
		{"operation_namespace", caseNamespace},
		{"sensitive_result_never_stored", caseSensitive},
	}, GateCases()...)
}

func want(err error, sentinel error, what string) error {
	if !errors.Is(err, sentinel) {
		return fmt.Errorf("%s: got %v, want %v", what, err, sentinel)
	}
	return nil
}

// wantForbidden requires the bare forbidden refusal (not authority
// released).
func wantForbidden(err error, what string) error {
	if err == nil || !errors.Is(err, extension.ErrForbidden) || errors.Is(err, extension.ErrAuthorityReleased) {
		return fmt.Errorf("%s: got %v, want the bare forbidden refusal", what, err)
	}
	return nil
}

// unissued has an execution token's shape but was never issued.
var unissued = strings.Repeat("A", 43)

// caseSupersession: no token exists before a claim, the claim issues one
// (under a scheduled driver, the one the executor received), and recovery
// issues a fresh one for the next epoch, revoking the lower epoch's token
// in the same step, so that only the new token acts.
func caseSupersession(f *Fixture) error {
	ctx := context.Background()
	w, err := f.Create(Binding)
	if err != nil {
		return err
	}
	if _, err := f.Env.Store.GetLiveExecution(ctx, w.ID); !errors.Is(err, storage.ErrNotFound) {
		return fmt.Errorf("before any claim the Work has an execution (%v), so it could hold a token", err)
	}
	if err := wantForbidden(second(f.Call(unissued, "emit", `{"type":"test.zero"}`, "")), "a call before any claim"); err != nil {
		return err
	}
	a, err := f.Claim(w)
	if err != nil {
		return err
	}
	if err := onlyLiveToken(f, a); err != nil {
		return fmt.Errorf("after the claim: %w", err)
	}
	if _, err := f.Call(a.Token, "emit", `{"type":"test.one"}`, ""); err != nil {
		return fmt.Errorf("the claimed attempt's token cannot emit: %w", err)
	}
	if err := f.Checkpoint(); err != nil {
		return err
	}
	b, err := f.Recover(a)
	if err != nil {
		return err
	}
	if b.Token == a.Token || b.TokenID == a.TokenID {
		return errors.New("recovery did not issue a fresh token")
	}
	if b.Execution.Epoch != a.Execution.Epoch+1 {
		return fmt.Errorf("recovery took epoch %d over at epoch %d, want the next", a.Execution.Epoch, b.Execution.Epoch)
	}
	if err := onlyLiveToken(f, b); err != nil {
		return fmt.Errorf("after the recovery: %w", err)
	}
	if err := wantForbidden(second(f.Call(a.Token, "emit", `{"type":"test.two"}`, "")), "the superseded epoch's token after recovery"); err != nil {
		return err
	}
	if _, err := f.Call(b.Token, "emit", `{"type":"test.two"}`, ""); err != nil {
		return fmt.Errorf("the recovered attempt's token cannot emit: %w", err)
	}
	evs, err := f.Events("test.two")
	if err != nil {
		return err
	}
	if len(evs) != 1 || evs[0].Execution != a.Execution.ID {
		return fmt.Errorf("test.two events = %d, want exactly the recovered attempt's one", len(evs))
	}
	return nil
}

// onlyLiveToken requires the attempt's token to be its execution's only
// live token, pinned to its epoch: issuing it revoked every lower epoch's.
func onlyLiveToken(f *Fixture, a *Attempt) error {
	toks, err := f.Env.Store.ListExecutionTokens(context.Background(), a.Execution.ID)
	if err != nil {
		return err
	}
	found := false
	for _, t := range toks {
		switch {
		case t.ID == a.TokenID:
			if t.Revoked() || t.Epoch != a.Execution.Epoch {
				return fmt.Errorf("the attempt's token %s is revoked (%v) or pinned to epoch %d, not %d", t.ID, t.Revoked(), t.Epoch, a.Execution.Epoch)
			}
			found = true
		case !t.Revoked():
			return fmt.Errorf("token %s of epoch %d is still live beside the epoch %d token", t.ID, t.Epoch, a.Execution.Epoch)
		}
	}
	if !found {
		return fmt.Errorf("the attempt's token %s is not stored for execution %s", a.TokenID, a.Execution.ID)
	}
	return nil
}

func second[T any](_ T, err error) error { return err }

func caseDigestOnly(f *Fixture) error {
	a, err := f.Start()
	if err != nil {
		return err
	}
	if _, err := f.Call(a.Token, "emit", `{"type":"test.one"}`, "r1"); err != nil {
		return err
	}
	if err := f.Checkpoint(); err != nil {
		return err
	}
	files, _ := filepath.Glob(f.Env.Path + "*")
	if len(files) == 0 {
		return errors.New("no database file to scan")
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(a.Token)) {
			return fmt.Errorf("the token's plaintext is in %s", filepath.Base(p))
		}
	}
	return nil
}

func caseCeiling(f *Fixture) error {
	a, err := f.Start()
	if err != nil {
		return err
	}
	if _, err := f.Call(a.Token, "emit", `{"type":"test.one"}`, ""); err != nil {
		return err
	}
	if err := f.Checkpoint(); err != nil {
		return err
	}
	f.Env.Ceiling.Deny(Scope, "emit")
	if err := wantForbidden(second(f.Call(a.Token, "emit", `{"type":"test.two"}`, "")), "emit after the ceiling dropped it"); err != nil {
		return err
	}
	f.Env.Ceiling.Allow(Scope, "emit")
	f.Env.Ceiling.Deny(Scope, "*")
	if err := wantForbidden(second(f.Call(a.Token, "emit", `{"type":"test.two"}`, "")), "emit after the scope was disabled"); err != nil {
		return err
	}
	f.Env.Ceiling.Allow(Scope, "*")
	if _, err := f.Call(a.Token, "emit", `{"type":"test.two"}`, ""); err != nil {
		return fmt.Errorf("emit after the ceiling was widened again: %w", err)
	}
	return nil
}

func caseRevocation(f *Fixture) error {
	a, err := f.Start()
	if err != nil {
		return err
	}
	if err := f.Checkpoint(); err != nil {
		return err
	}
	if err := f.TB.Revoke(context.Background(), a.TokenID); err != nil {
		return err
	}
	if err := wantForbidden(second(f.Call(a.Token, "emit", `{"type":"test.one"}`, "")), "emit with a revoked token"); err != nil {
		return err
	}
	_, err = f.TB.Guidance(context.Background(), a.Token, extension.Assertions{})
	return wantForbidden(err, "guidance with a revoked token")
}

func caseReplay(f *Fixture) error {
	a, err := f.Start()
	if err != nil {
		return err
	}
	first, err := f.Call(a.Token, "emit", `{"type":"test.one","data":{"n":1}}`, "r1")
	if err != nil {
		return err
	}
	if err := f.Checkpoint(); err != nil {
		return err
	}
	again, err := f.Call(a.Token, "emit", `{ "data" : {"n":1}, "type":"test.one" }`, "r1")
	if err != nil {
		return fmt.Errorf("repeat of r1: %w", err)
	}
	if !again.Replayed || !bytes.Equal(again.Result, first.Result) {
		return fmt.Errorf("repeat of r1 = %s (replayed %v), want the first result %s replayed", again.Result, again.Replayed, first.Result)
	}
	if evs, err := f.Events("test.one"); err != nil || len(evs) != 1 {
		return fmt.Errorf("test.one events after a replay = %d (%v), want 1", len(evs), err)
	}
	if err := want(second(f.Call(a.Token, "emit", `{"type":"test.one","data":{"n":2}}`, "r1")), extension.ErrRequestConflict, "r1 with another input"); err != nil {
		return err
	}
	return want(second(f.Call(a.Token, "read_context", `{}`, "r1")), extension.ErrRequestConflict, "r1 with another operation")
}

// counter is an extension whose handler counts its runs per request ID.
type counter struct {
	mu   sync.Mutex
	runs map[string]int
}

func (c *counter) registration() extension.Registration {
	return extension.Registration{Name: "acme", Operations: []extension.Operation{
		{Name: "acme.count", Summary: "Count a run.", Handler: func(_ context.Context, auth extension.Authority, _ json.RawMessage) (json.RawMessage, error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.runs[auth.RequestID]++
			return json.Marshal(map[string]any{"run": c.runs[auth.RequestID], "execution": auth.Execution})
		}},
		{Name: "acme.echo", Summary: "Echo the input.", Capabilities: []string{"test.echo"}, Handler: func(_ context.Context, _ extension.Authority, in json.RawMessage) (json.RawMessage, error) {
			return in, nil
		}},
	}}
}

func caseAtMostOnce(f *Fixture) error {
	c := &counter{runs: map[string]int{}}
	if err := f.Register(c.registration()); err != nil {
		return err
	}
	a, err := f.Start()
	if err != nil {
		return err
	}
	first, err := f.Call(a.Token, "acme.count", `{"x":1}`, "once")
	if err != nil {
		return err
	}
	if err := f.Checkpoint(); err != nil {
		return err
	}
	again, err := f.Call(a.Token, "acme.count", `{"x":1}`, "once")
	if err != nil {
		return err
	}
	if c.runs["once"] != 1 || !again.Replayed || !bytes.Equal(first.Result, again.Result) {
		return fmt.Errorf("handler ran %d times for one request ID (replayed %v)", c.runs["once"], again.Replayed)
	}
	return want(second(f.Call(a.Token, "acme.count", `{"x":2}`, "once")), extension.ErrRequestConflict, "the request ID with another input")
}

func caseForgery(f *Fixture) error {
	a, err := f.Start()
	if err != nil {
		return err
	}
	other, err := f.Start()
	if err != nil {
		return err
	}
	if err := f.Checkpoint(); err != nil {
		return err
	}
	for _, in := range []string{
		`{"type":"test.forged","source":"core.host"}`,
		`{"type":"test.forged","parent":"` + other.Work.CreatedEvent + `"}`,
		`{"type":"test.forged","work_id":"` + other.Work.ID + `"}`,
		`{"type":"test.forged","execution":"` + other.Execution.ID + `"}`,
		`{"type":"test.forged","correlation_key":"` + other.Work.ID + `"}`,
		`{"type":"core.work.finished"}`,
	} {
		if err := want(second(f.Call(a.Token, "emit", in, "")), extension.ErrInvalid, "emit "+in); err != nil {
			return err
		}
	}
	if evs, err := f.Events(""); err != nil {
		return err
	} else {
		for _, ev := range evs {
			if ev.Type == "test.forged" || (ev.Type == "core.work.finished") {
				return fmt.Errorf("a forged emission was accepted: %s from %s", ev.Type, ev.Source)
			}
		}
	}
	res, err := f.Call(a.Token, "emit", `{"type":"test.owned","correlation_key":"`+a.Work.ID+`"}`, "")
	if err != nil {
		return fmt.Errorf("emit with the Work's own key: %w", err)
	}
	var out struct {
		EventID string `json:"event_id"`
	}
	if err := json.Unmarshal(res.Result, &out); err != nil {
		return err
	}
	ev, err := f.Env.Store.GetEvent(context.Background(), out.EventID)
	if err != nil {
		return err
	}
	if ev.Source != kernel.SourceExecution || ev.Work != a.Work.ID || ev.Execution != a.Execution.ID || ev.Parent == "" {
		return fmt.Errorf("the host did not assign the emission's identity: %+v", ev)
	}
	return nil
}

// handshake declares with op and checks that authority is released at
// once, that a repeat learns the declaration landed, and that the
// declaration waits in storage for Complete. Under a scheduled driver the
// segment then ends with res and the case checks what Complete made of
// the declaration (applied), and that the finished execution's token is
// refused.
func handshake(f *Fixture, op, input string, kind storage.DeclarationKind, res executor.Result, applied func(done *Attempt, d storage.Declaration) error) error {
	ctx := context.Background()
	a, err := f.Start()
	if err != nil {
		return err
	}
	if _, err := f.Call(a.Token, op, input, "d1"); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := f.Checkpoint(); err != nil {
		return err
	}
	if err := want(second(f.Call(a.Token, "emit", `{"type":"test.late"}`, "")), extension.ErrAuthorityReleased, "emit after "+op); err != nil {
		return err
	}
	if err := want(second(f.Call(a.Token, op, input, "d1")), extension.ErrAuthorityReleased, op+" repeated after a lost response"); err != nil {
		return err
	}
	d, err := f.Env.Store.GetPendingDeclaration(ctx, a.Execution.ID)
	if err != nil {
		return fmt.Errorf("no pending declaration after %s: %w", op, err)
	}
	if d.Kind != kind || d.Epoch != a.Execution.Epoch {
		return fmt.Errorf("declaration = %s at epoch %d, want %s at %d", d.Kind, d.Epoch, kind, a.Execution.Epoch)
	}
	if _, err := kernel.ParseDeclaration(d); err != nil {
		return fmt.Errorf("the declaration does not parse for Complete: %w", err)
	}
	done, err := f.Finish(a, res)
	if errors.Is(err, ErrNotScheduled) {
		return nil
	}
	if err != nil {
		return err
	}
	after, err := f.Env.Store.GetDeclaration(ctx, a.Execution.ID, a.Execution.Epoch)
	if err != nil {
		return err
	}
	if after.Pending() || after.Disposition != "applied" {
		return fmt.Errorf("after the segment ended the declaration is pending %v, disposition %q; want it applied", after.Pending(), after.Disposition)
	}
	if err := applied(done, d); err != nil {
		return err
	}
	return wantForbidden(second(f.Call(done.Token, "emit", `{"type":"test.after"}`, "")), "the finished execution's token")
}

// caseWaitHandshake: a declared wait releases authority at once; when the
// (not resume-capable) segment ends, Complete registers the Wait with its
// timeout, the execution finishes and the Work waits, where the
// executor's own success would have ended it.
func caseWaitHandshake(f *Fixture) error {
	return handshake(f, "wait", `{"types":["test.reply"],"timeout":"30m"}`, storage.DeclaredWait,
		executor.Result{Outcome: executor.Succeeded, Message: "exit 0"},
		func(done *Attempt, d storage.Declaration) error {
			if done.Work.State != storage.WorkWaiting || done.Execution.State != storage.ExecutionFinished {
				return fmt.Errorf("after a declared wait the Work is %s and its execution %s; want waiting and finished", done.Work.State, done.Execution.State)
			}
			return activeWait(f, done, d, "test.reply", 30*time.Minute)
		})
}

// caseOutcomeHandshake: a declared outcome releases authority at once, and
// Complete ends the Work with it, replacing the executor's failure.
func caseOutcomeHandshake(f *Fixture) error {
	return handshake(f, "declare_outcome", `{"outcome":"succeeded","message":"done","data":{"n":1}}`, storage.DeclaredOutcome,
		executor.Result{Outcome: executor.Failed, ExitCode: 3, Message: "exit 3"},
		func(done *Attempt, _ storage.Declaration) error {
			if done.Work.State != storage.WorkSucceeded || done.Work.OutcomeMessage != "done" || done.Execution.Result != storage.ResultSucceeded {
				return fmt.Errorf("after a declared success and an executor failure the Work is %s (%q) and its execution %s; want the declared outcome",
					done.Work.State, done.Work.OutcomeMessage, done.Execution.Result)
			}
			var data map[string]int
			if err := json.Unmarshal(done.Work.OutcomeData, &data); err != nil || data["n"] != 1 {
				return fmt.Errorf("the Work's outcome data is %s, want the declared {\"n\":1}", done.Work.OutcomeData)
			}
			return nil
		})
}

// activeWait requires the Work's active Wait to be the declared one:
// registered for the attempt's execution, on typ, timing out timeout
// after the declaration d, with its timer armed.
func activeWait(f *Fixture, done *Attempt, d storage.Declaration, typ string, timeout time.Duration) error {
	wt, err := f.Env.Store.GetActiveWait(context.Background(), done.Work.ID)
	if err != nil {
		return fmt.Errorf("no active Wait for the Work: %w", err)
	}
	if wt.Execution != done.Execution.ID || len(wt.Types) != 1 || wt.Types[0] != typ || wt.Timer == "" || !wt.TimeoutAt.Equal(d.DeclaredAt.Add(timeout)) {
		return fmt.Errorf("the active Wait is %+v; want execution %s's wait on %s with a timer %v after the declaration", wt, done.Execution.ID, typ, timeout)
	}
	return nil
}

func op(name string) extension.Operation {
	return extension.Operation{Name: name, Summary: "Test.", Handler: func(context.Context, extension.Authority, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{}`), nil
	}}
}

func caseNamespace(f *Fixture) error {
	if err := want(f.Register(extension.Registration{Name: "squatter", Operations: []extension.Operation{op("squatter.ok"), op("acme.count")}}),
		extension.ErrInvalid, "a registration taking another namespace's operation"); err != nil {
		return err
	}
	if err := f.Register(extension.Registration{Name: "acme", Operations: []extension.Operation{op("acme.count")}}); err != nil {
		return fmt.Errorf("the owner's registration: %w", err)
	}
	if err := f.Register(extension.Registration{Name: "squatter", Operations: []extension.Operation{op("squatter.ok")}}); err != nil {
		return fmt.Errorf("a refused registration registered something: %w", err)
	}
	if err := want(f.Register(extension.Registration{Name: "acme-2", Operations: []extension.Operation{op("acme.echo")}}), extension.ErrInvalid, "a neighbour's namespace"); err != nil {
		return err
	}
	if err := want(f.Register(extension.Registration{Name: "acme", Operations: []extension.Operation{op("acme.echo")}}), extension.ErrConflict, "a repeated registration name"); err != nil {
		return err
	}
	if err := want(f.Register(extension.Registration{Name: "emit", Operations: nil}), extension.ErrConflict, "a builtin's name"); err != nil {
		return err
	}
	if err := want(f.Register(extension.Registration{Name: "Bad.Name"}), extension.ErrInvalid, "a malformed registration name"); err != nil {
		return err
	}
	if err := f.Checkpoint(); err != nil {
		return err
	}
	a, err := f.Start()
	if err != nil {
		return err
	}
	// The squatter's attempt never reached acme.echo: it stays undeclared.
	return wantForbidden(second(f.Call(a.Token, "acme.echo", `{}`, "")), "an operation nobody registered")
}

// sensitive is an extension with two sensitive operations, acme.secret
// (declared Sensitive) and acme.credential (serving git.credential, which
// makes it sensitive), and a plain one, acme.plain. Each counts its runs
// and answers with a value unique to the run, which the case looks for in
// the database's files.
type sensitive struct {
	mu   sync.Mutex
	runs map[string]int // by operation
}

// secretOf is the value op answers on its run'th run.
func secretOf(op string, run int) string {
	return fmt.Sprintf("ghs_%s_run%d_c4e1f09b7d", strings.ReplaceAll(op, ".", "_"), run)
}

func (s *sensitive) count(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs[op]
}

func (s *sensitive) registration() extension.Registration {
	h := func(_ context.Context, auth extension.Authority, _ json.RawMessage) (json.RawMessage, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.runs[auth.Operation]++
		return json.Marshal(map[string]string{"username": "x-access-token", "password": secretOf(auth.Operation, s.runs[auth.Operation])})
	}
	return extension.Registration{Name: "acme", Operations: []extension.Operation{
		{Name: "acme.secret", Summary: "Answer a secret.", Sensitive: true, Handler: h},
		{Name: "acme.credential", Summary: "Answer a git credential.", Capabilities: []string{extension.CapabilityGitCredential}, Handler: h},
		{Name: "acme.plain", Summary: "Answer a value that is no secret.", Handler: h},
	}}
}

// caseSensitive: a sensitive operation's result never reaches storage. A
// repeat with the same request ID and body runs the handler again (it is
// not replayed), a changed body is still a request conflict, and none of
// the answers is in the database's files (db, -wal, -shm read raw). A
// plain operation still replays from storage, and its stored answer is
// found in those files, so the scan can see a stored result.
func caseSensitive(f *Fixture) error {
	s := &sensitive{runs: map[string]int{}}
	if err := f.Register(s.registration()); err != nil {
		return err
	}
	a, err := f.Start()
	if err != nil {
		return err
	}
	const in = `{"protocol":"https","host":"example.test"}`
	ops := []string{"acme.secret", "acme.credential"}
	var secrets []string
	for _, op := range ops {
		res, err := f.Call(a.Token, op, in, "cred-"+op)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		if !bytes.Contains(res.Result, []byte(secretOf(op, 1))) {
			return fmt.Errorf("%s answered %s, want its handler's answer", op, res.Result)
		}
		secrets = append(secrets, secretOf(op, 1))
	}
	plain, err := f.Call(a.Token, "acme.plain", in, "plain")
	if err != nil {
		return fmt.Errorf("acme.plain: %w", err)
	}
	if err := f.Checkpoint(); err != nil {
		return err
	}
	if err := scanStored(f, secrets, secretOf("acme.plain", 1)); err != nil {
		return err
	}
	for _, op := range ops {
		// The same body, spelled differently: the same canonical input.
		again, err := f.Call(a.Token, op, `{ "host": "example.test", "protocol": "https" }`, "cred-"+op)
		if err != nil {
			return fmt.Errorf("the repeat of sensitive %s: %w", op, err)
		}
		if again.Replayed || s.count(op) != 2 || !bytes.Contains(again.Result, []byte(secretOf(op, 2))) {
			return fmt.Errorf("the repeat of sensitive %s answered %s (replayed %v) after %d handler runs; want its handler run again and its own answer",
				op, again.Result, again.Replayed, s.count(op))
		}
		secrets = append(secrets, secretOf(op, 2))
		if err := want(second(f.Call(a.Token, op, `{"protocol":"https","host":"other.test"}`, "cred-"+op)), extension.ErrRequestConflict,
			"sensitive "+op+"'s request ID with another input"); err != nil {
			return err
		}
		if s.count(op) != 2 {
			return fmt.Errorf("sensitive %s's handler ran for a conflicting request (%d runs)", op, s.count(op))
		}
	}
	again, err := f.Call(a.Token, "acme.plain", in, "plain")
	if err != nil {
		return fmt.Errorf("the repeat of acme.plain: %w", err)
	}
	if !again.Replayed || s.count("acme.plain") != 1 || !bytes.Equal(again.Result, plain.Result) {
		return fmt.Errorf("the repeat of plain acme.plain answered %s (replayed %v) after %d handler runs; want the first answer replayed from storage",
			again.Result, again.Replayed, s.count("acme.plain"))
	}
	if err := f.Checkpoint(); err != nil {
		return err
	}
	return scanStored(f, secrets, secretOf("acme.plain", 1))
}

// scanStored reads the database's files raw (db, -wal, -shm) and requires
// that none holds any of secrets and that one holds stored, a result that
// must be stored, so the scan is known to see stored results.
func scanStored(f *Fixture, secrets []string, stored string) error {
	files, _ := filepath.Glob(f.Env.Path + "*")
	if len(files) == 0 {
		return errors.New("no database file to scan")
	}
	found := false
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, secret := range secrets {
			if bytes.Contains(b, []byte(secret)) {
				return fmt.Errorf("a sensitive operation's answer (%s…) is stored in %s", secret[:strings.LastIndex(secret, "_")], filepath.Base(p))
			}
		}
		found = found || bytes.Contains(b, []byte(stored))
	}
	if !found {
		return errors.New("a plain operation's stored answer is in no database file: the scan cannot see a stored result")
	}
	return nil
}
