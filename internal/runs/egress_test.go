package runs

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestServeEgress: the egress socket is served 0600 beside the toolbelt
// socket, tells its handler the execution, and goes with the toolbelt
// socket on Close and Sweep; another execution's endpoint is refused.
func TestServeEgress(t *testing.T) {
	d, _ := setup(t)
	ep, err := d.Prepare("exe_egress", "tok")
	if err != nil {
		t.Fatal(err)
	}
	if ep.Egress != filepath.Join(filepath.Dir(ep.Socket), "egress.sock") {
		t.Fatalf("egress socket = %s, want egress.sock beside %s", ep.Egress, ep.Socket)
	}
	if err := d.Serve("exe_egress", ep, echo("toolbelt")); err != nil {
		t.Fatal(err)
	}
	if err := d.ServeEgress("exe_egress", ep, echo("egress")); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, ep.Egress); m.Type() != fs.ModeSocket || m.Perm() != 0o600 {
		t.Fatalf("egress socket mode = %v, want a socket with 0600", m)
	}
	got, err := call(ep.Egress, "GET", "/", "")
	if err != nil || got["tag"] != "egress" || got["execution"] != "exe_egress" {
		t.Fatalf("egress socket answered %v, %v", got, err)
	}
	if got, err := call(ep.Socket, "GET", "/", ""); err != nil || got["tag"] != "toolbelt" {
		t.Fatalf("toolbelt socket answered %v, %v", got, err)
	}
	other, err := d.Prepare("exe_other", "tok")
	if err != nil {
		t.Fatal(err)
	}
	mixed := ep
	mixed.Egress = other.Egress
	if err := d.ServeEgress("exe_egress", mixed, echo("x")); err == nil {
		t.Error("ServeEgress accepted another execution's egress socket")
	}
	d.Close("exe_egress")
	if _, err := os.Lstat(ep.Egress); !os.IsNotExist(err) {
		t.Errorf("after Close the egress socket is still there: %v", err)
	}
	if _, err := call(ep.Egress, "GET", "/", ""); err == nil {
		t.Error("the egress socket still answers after Close")
	}

	// Served again (an adopted attempt), then swept with its directory.
	if err := d.ServeEgress("exe_egress", ep, echo("again")); err != nil {
		t.Fatal(err)
	}
	if got, err := call(ep.Egress, "GET", "/", ""); err != nil || got["tag"] != "again" {
		t.Fatalf("egress socket served again answered %v, %v", got, err)
	}
	if _, err := d.Sweep(func(id string) bool { return id != "exe_egress" }); err != nil {
		t.Fatal(err)
	}
	if _, err := call(ep.Egress, "GET", "/", ""); err == nil {
		t.Error("the egress socket still answers after its run directory was swept")
	}
	if _, err := os.Lstat(ep.Dir); !os.IsNotExist(err) {
		t.Errorf("the run directory survived the sweep: %v", err)
	}
}
