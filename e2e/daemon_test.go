package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/open-conduit/open-conduit/client"
)

func perm(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestSocketAndTokenFilePermissions(t *testing.T) {
	e := newEnv(t)
	e.start()
	for path, want := range map[string]os.FileMode{
		e.state:                           0o700,
		e.socket():                        0o600,
		filepath.Join(e.state, "private"): 0o700,
		e.tokenFile():                     0o600,
		filepath.Join(e.state, "coordination.db"): 0o600,
	} {
		if got := perm(t, path); got != want {
			t.Errorf("%s has mode %04o, want %04o", path, got, want)
		}
	}
	if fi, err := os.Lstat(e.socket()); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Errorf("%s is not a socket (%v)", e.socket(), err)
	}
	code, out, stderr := e.cli("health")
	if code != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("health: exit %d, %q %q", code, out, stderr)
	}
	// Every route needs a valid bearer token.
	_, err := client.New(e.socket(), client.StaticToken("not-a-token")).Health(context.Background())
	if !client.IsUnauthorized(err) {
		t.Fatalf("health with a wrong token: %v, want unauthorized", err)
	}
}

func TestSecondDaemonExitsOneNamingTheHolder(t *testing.T) {
	e := newEnv(t)
	first := e.start()
	second := e.spawn()
	if code := second.wait(); code != 1 {
		t.Fatalf("second daemon exited %d, want 1", code)
	}
	pid := first.cmd.Process.Pid
	if msg := second.logs.String(); !strings.Contains(msg, "process "+strconv.Itoa(pid)) || !strings.Contains(msg, "daemon.lock") {
		t.Errorf("second daemon said %q, want it to name process %d and the lock", msg, pid)
	}
	// The first one is unharmed.
	if _, err := e.client().Health(context.Background()); err != nil {
		t.Fatalf("the first daemon stopped answering: %v", err)
	}
}

func TestUnsafeStateDirectoriesAreRefused(t *testing.T) {
	for _, mode := range []os.FileMode{0o750, 0o705, 0o777} {
		t.Run(mode.String(), func(t *testing.T) {
			e := newEnv(t)
			if err := os.Mkdir(e.state, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(e.state, mode); err != nil {
				t.Fatal(err)
			}
			d := e.spawn()
			if code := d.wait(); code != 1 {
				t.Fatalf("daemon on a %04o directory exited %d, want 1", mode, code)
			}
			msg := d.logs.String()
			if !strings.Contains(msg, e.state) || !strings.Contains(msg, "chmod 700 "+e.state) {
				t.Errorf("refusal %q does not name the path and the fix", msg)
			}
			if _, err := os.Stat(e.socket()); err == nil {
				t.Error("a refused daemon made its socket")
			}
		})
	}
}

func TestInvalidConfigFileStopsTheStart(t *testing.T) {
	e := newEnv(t)
	if err := os.Mkdir(e.state, 0o700); err != nil {
		t.Fatal(err)
	}
	bad := `{"version": 1, "scopes": {"a": {"parent": "missing"}}, "surprise": 1}`
	if err := os.WriteFile(filepath.Join(e.state, "config.json"), []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	d := e.spawn()
	if code := d.wait(); code != 1 {
		t.Fatalf("daemon with an invalid config exited %d, want 1", code)
	}
	msg := d.logs.String()
	for _, want := range []string{"/surprise", "/scopes/a/parent"} {
		if !strings.Contains(msg, want) {
			t.Errorf("diagnostics %q miss %s", msg, want)
		}
	}
}

func TestGracefulShutdown(t *testing.T) {
	e := newEnv(t)
	d := e.start()
	if code := d.stop(); code != 0 {
		t.Fatalf("SIGTERM: exit %d, want 0:\n%s", code, d.logs)
	}
	if _, err := os.Lstat(e.socket()); err == nil {
		t.Error("the management socket is still there after shutdown")
	}
	if !strings.Contains(d.logs.String(), `"msg":"daemon stopped"`) {
		t.Errorf("no shutdown line in the log:\n%s", d.logs)
	}
	// The lock was released: the next daemon starts on the same state.
	e.start()
}
