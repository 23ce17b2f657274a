package toolbelt_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/kernel"
)

// A translated wait (Operation.Wait) is declared like the wait builtin,
// owned by the operation's registration: authority is released, the
// declaration holds the plan, and a refusal or a bad plan declares
// nothing.
func TestToolbeltTranslatedWait(t *testing.T) {
	f := fixture(t, false)
	ctx := context.Background()
	var seen extension.Authority
	waitOp := extension.Operation{Name: "acme.echo", Summary: "Waits for a review.", Wait: func(_ context.Context, auth extension.Authority, in json.RawMessage) (extension.WaitPlan, error) {
		seen = auth
		switch {
		case strings.Contains(string(in), "refuse"):
			return extension.WaitPlan{}, &extension.OperationError{Code: "acme_no_review", Message: "nothing to wait for"}
		case strings.Contains(string(in), "badtype"):
			return extension.WaitPlan{Types: []string{"Not A Type"}}, nil
		case strings.Contains(string(in), "panic"):
			panic("ghs_secret")
		}
		return extension.WaitPlan{Types: []string{"acme.review.submitted"}, Keys: []string{"o/r#7"}, Timeout: 2 * time.Hour, Output: json.RawMessage(`{"pr":7}`)}, nil
	}}
	if err := f.Register(extension.Registration{Name: "acme", Operations: []extension.Operation{waitOp}}); err != nil {
		t.Fatal(err)
	}
	// Two servers are refused.
	both := waitOp
	both.Name, both.Handler = "other.both", okHandler
	if err := f.Register(extension.Registration{Name: "other", Operations: []extension.Operation{both}}); err == nil {
		t.Fatal("an operation with a Handler and a Wait was registered")
	}
	a, err := f.Start()
	if err != nil {
		t.Fatal(err)
	}
	var oe *extension.OperationError
	if _, err := f.Call(a.Token, "acme.echo", `{"x":"refuse"}`, ""); !errors.As(err, &oe) || oe.Code != "acme_no_review" {
		t.Fatalf("a refused wait: %v", err)
	}
	if _, err := f.Call(a.Token, "acme.echo", `{"x":"badtype"}`, ""); kernel.CodeOf(err) != kernel.ErrInvalidDeclaration.Code {
		t.Fatalf("a plan with a bad type: %v (%s)", err, kernel.CodeOf(err))
	}
	if _, err := f.Call(a.Token, "acme.echo", `{"x":"panic"}`, ""); err == nil || strings.Contains(err.Error(), "ghs_secret") {
		t.Fatalf("a panicking translator: %v", err)
	}
	if _, err := f.Env.Store.GetPendingDeclaration(ctx, a.Execution.ID); err == nil {
		t.Fatal("a refused wait left a declaration")
	}
	res, err := f.Call(a.Token, "acme.echo", `{"x":"ok"}`, "r-wait")
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Declared string `json:"declared"`
		Wait     struct {
			Types        []string `json:"types"`
			Keys         []string `json:"keys"`
			Timeout      string   `json:"timeout"`
			Registration string   `json:"registration"`
		} `json:"wait"`
		Output json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(res.Result, &body); err != nil || body.Declared != "wait" || body.Wait.Registration != "acme" || body.Wait.Timeout != "2h0m0s" ||
		body.Wait.Keys[0] != "o/r#7" || string(body.Output) != `{"pr":7}` {
		t.Fatalf("result %s (%v)", res.Result, err)
	}
	if seen.Work != a.Execution.Work || seen.Operation != "acme.echo" {
		t.Fatalf("the translator was handed %+v", seen)
	}
	if _, err := f.Call(a.Token, "emit", `{"type":"test.late"}`, ""); !errors.Is(err, extension.ErrAuthorityReleased) {
		t.Fatalf("a call after a translated wait: %v", err)
	}
	d, err := f.Env.Store.GetPendingDeclaration(ctx, a.Execution.ID)
	if err != nil {
		t.Fatal(err)
	}
	decl, err := kernel.ParseDeclaration(d)
	if err != nil || decl.Wait == nil || decl.Wait.Registration != "acme" || decl.Wait.Types[0] != "acme.review.submitted" || decl.Wait.Timeout != 2*time.Hour {
		t.Fatalf("declaration %+v (%v)", decl, err)
	}
}
