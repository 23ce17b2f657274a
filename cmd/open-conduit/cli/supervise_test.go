package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestSuperviseIsHiddenAndNeedsADirectory(t *testing.T) {
	var out, errOut bytes.Buffer
	s := Streams{In: strings.NewReader(""), Out: &out, Err: &errOut}
	if code := Main(context.Background(), []string{"supervise"}, s); code != ExitUsage {
		t.Errorf("supervise without a directory exited %d, want %d", code, ExitUsage)
	}
	out.Reset()
	if code := Main(context.Background(), []string{"--help"}, s); code != ExitOK {
		t.Fatalf("--help exited %d", code)
	}
	if strings.Contains(out.String(), "supervise") {
		t.Errorf("help lists the hidden supervise command:\n%s", out.String())
	}
}
