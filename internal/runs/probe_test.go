package runs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// SocketPath answers what Prepare would choose, and creates nothing.
func TestSocketPathCreatesNothing(t *testing.T) {
	d, b := setup(t)
	got, err := d.SocketPath("exe_probe")
	if want := filepath.Join(b.state, "runs", Key("exe_probe"), "toolbelt.sock"); err != nil || got != want {
		t.Fatalf("SocketPath = %q, %v; want %q", got, err, want)
	}
	if _, err := os.Stat(d.Root()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("SocketPath created %s: %v", d.Root(), err)
	}

	tmp := shortTemp(t)
	long, err := New(longState(t), Options{TmpBase: tmp, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	got, err = long.SocketPath("exe_probe")
	want := filepath.Join(tmp, fmt.Sprintf("open-conduit-%d", os.Getuid()), Key("exe_probe"), "toolbelt.sock")
	if err != nil || got != want {
		t.Fatalf("SocketPath of a long state directory = %q, %v; want the fallback %q", got, err, want)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("SocketPath created the fallback directories: %v", entries)
	}
	ep, err := long.Prepare("exe_probe", "tok")
	if err != nil || ep.Socket != got {
		t.Errorf("Prepare chose %q (%v), SocketPath said %q", ep.Socket, err, got)
	}

	tooLong, err := New(longState(t), Options{TmpBase: filepath.Join(shortTemp(t), strings.Repeat("t", 80)), Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tooLong.SocketPath("exe_probe"); !errors.Is(err, ErrEndpointUnavailable) {
		t.Errorf("SocketPath with no path that fits = %v, want ErrEndpointUnavailable", err)
	}
	if _, err := d.SocketPath(""); err == nil {
		t.Error("SocketPath of an empty execution id succeeds")
	}
}
