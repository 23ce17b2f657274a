package toolbelt_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/toolbelt/toolbelttest"
)

// TestCreateWorkRulesAreShared: an execution's create_work and an
// operator's CreateWork, seeing the same configuration, refuse the same
// binding and grants with the same code, and accept the same ones.
func TestCreateWorkRulesAreShared(t *testing.T) {
	f := fixture(t, false)
	a, err := f.Start()
	if err != nil {
		t.Fatal(err)
	}
	ctl := kernel.NewControl(kernel.ControlOptions{Runtime: f.Env.Runtime, Store: f.Env.Store, Scopes: f.Env.Options().Scopes})
	for _, c := range []struct {
		name    string
		binding string
		grants  []string
		code    string
	}{
		{"the binding and its grant", toolbelttest.Binding, []string{toolbelttest.Grant}, ""},
		{"another binding of the scope", toolbelttest.Resumable, nil, ""},
		{"unknown binding", "b9", nil, kernel.ErrUnknownBinding.Code},
		{"unknown grant", toolbelttest.Binding, []string{"nope"}, kernel.ErrUnknownGrant.Code},
		{"one unknown grant among known", toolbelttest.Resumable, []string{toolbelttest.Grant, "nope"}, kernel.ErrUnknownGrant.Code},
	} {
		t.Run(c.name, func(t *testing.T) {
			in, _ := json.Marshal(map[string]any{"binding": c.binding, "grants": c.grants})
			_, tbErr := f.Call(a.Token, "create_work", string(in), "")
			_, opErr := ctl.CreateWork(operator, kernel.CreateWorkRequest{Scope: toolbelttest.Scope, Binding: c.binding, Grants: c.grants})
			for who, err := range map[string]error{"create_work": tbErr, "CreateWork": opErr} {
				if got := kernel.CodeOf(err); got != c.code || (c.code == "") != (err == nil) {
					t.Errorf("%s: %v (code %q), want code %q", who, err, got, c.code)
				}
				if c.code != "" && !errors.Is(err, extension.ErrInvalid) {
					t.Errorf("%s: %v is not of kind invalid", who, err)
				}
			}
			if tbErr != nil && opErr != nil && tbErr.Error() != opErr.Error() {
				t.Errorf("the two paths say it differently:\ncreate_work: %v\nCreateWork:  %v", tbErr, opErr)
			}
		})
	}
}
