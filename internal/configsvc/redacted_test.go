package configsvc_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/configsvc"
	"github.com/open-conduit/open-conduit/internal/management/mgmttest"
)

// The redacted document GET /v1/config shows applies back: applied as it
// is, it is the active configuration (no generation); edited, its
// redacted secret keeps the active reference, which the saved file holds.
// A redacted form with no reference to keep is refused, not taken as one.
func TestTheRedactedDocumentAppliesBack(t *testing.T) {
	ctx := context.Background()
	b := newCfg(t, "", nil)
	if err := b.svc.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	shown := b.svc.Active().Normalized
	if !bytes.Contains(shown, []byte(`"env:<redacted>"`)) || bytes.Contains(shown, []byte(mgmttest.CanaryReference)) {
		t.Fatalf("the normalized document is not redacted: %s", shown)
	}
	if _, res, err := b.svc.ValidateStored(ctx, shown); err != nil || !res.Valid() {
		t.Fatalf("validate of the redacted document: %v %v", res.Diagnostics, err)
	}
	same, err := b.svc.Apply(ctx, configsvc.ApplyRequest{Config: shown, ExpectedGeneration: 1, Actor: "operator:local"})
	if err != nil || !same.Unchanged || same.Generation.Number != 1 {
		t.Fatalf("apply of the redacted document = %+v, %v", same, err)
	}
	edited := bytes.Replace(shown, []byte(`"reads":["work"]`), []byte(`"reads":["work","events"]`), 1)
	if bytes.Equal(edited, shown) {
		t.Fatalf("the edit changed nothing in %s", shown)
	}
	next, err := b.svc.Apply(ctx, configsvc.ApplyRequest{Config: edited, ExpectedGeneration: 1, Actor: "operator:local"})
	if err != nil || next.Unchanged || next.Generation.Number != 2 {
		t.Fatalf("apply of the edited document = %+v, %v", next, err)
	}
	saved, err := os.ReadFile(b.path())
	if err != nil || !bytes.Contains(saved, []byte("env:"+mgmttest.CanaryReference)) || bytes.Contains(saved, []byte("<redacted>")) {
		t.Fatalf("config.json after the apply: %s %v", saved, err)
	}
	if next.Generation.Hash != hashOf(t, otherConfig) {
		t.Errorf("the edited document's hash is not the one with the reference kept")
	}
	// Another scheme, or a secret the active document lacks, has nothing
	// to keep.
	for _, doc := range [][]byte{
		bytes.Replace(edited, []byte(`"env:<redacted>"`), []byte(`"cmd:<redacted>"`), 1),
		bytes.Replace(edited, []byte(`"canary":"env:<redacted>"`), []byte(`"canary":"env:<redacted>","other":"env:<redacted>"`), 1),
	} {
		_, err := b.svc.Apply(ctx, configsvc.ApplyRequest{Config: doc, ExpectedGeneration: 2, Actor: "operator:local"})
		var re *configsvc.Refusal
		if !errors.As(err, &re) || len(re.Diagnostics) != 1 || re.Diagnostics[0].Code != config.CodeInvalidSecretReference ||
			!strings.Contains(re.Diagnostics[0].Remedy, "redacted form") {
			t.Errorf("apply of an unfillable redacted form: %v", err)
		}
	}
}
