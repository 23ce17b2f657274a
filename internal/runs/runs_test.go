package runs

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

// discard is the logger of tests that do not read the socket servers'
// errors: New requires one.
var discard = slog.New(slog.DiscardHandler)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type bundle struct {
	state string // the state directory
	tmp   string // the injected base of the short-path fallback
}

// setup returns Dirs over a fresh, short state directory, with the fallback
// base injected.
func setup(t *testing.T) (*Dirs, bundle) {
	t.Helper()
	b := bundle{state: shortTemp(t), tmp: shortTemp(t)}
	d, err := New(b.state, Options{TmpBase: b.tmp, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.CloseAll)
	return d, b
}

// shortTemp makes a directory with a short path, so socket paths stay far
// below the limit unless a test makes them long on purpose.
func shortTemp(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "oc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// echo answers every request with what it saw, including the execution of
// the socket it arrived on.
func echo(tag string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		exe, _ := ExecutionFromContext(r.Context())
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{
			"tag": tag, "execution": exe, "method": r.Method, "path": r.URL.Path, "body": string(body),
		})
	})
}

// call sends one request over the Unix socket at socket and decodes the
// echo.
func call(socket, method, path, body string) (map[string]string, error) {
	c := &http.Client{Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
	}}
	req, err := http.NewRequest(method, "http://localhost"+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func TestKey(t *testing.T) {
	for _, id := range []string{"exe_01J0000000000000000000000", "exe/with/slashes", "x"} {
		sum := sha256.Sum256([]byte(id))
		want := fmt.Sprintf("%x", sum)[:16]
		if got := Key(id); got != want {
			t.Errorf("Key(%q) = %q, want %q", id, got, want)
		}
		if !isKey(Key(id)) {
			t.Errorf("Key(%q) = %q does not have the shape of a key", id, Key(id))
		}
	}
	if Key("exe_a") == Key("exe_b") {
		t.Error("two executions share a key")
	}
}

func TestPrepareLayout(t *testing.T) {
	d, b := setup(t)
	const exe = "exe_layout/1"
	ep, err := d.Prepare(exe, "tok-one")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(b.state, "runs", Key(exe))
	want := Endpoint{Dir: dir, Socket: filepath.Join(dir, "toolbelt.sock"), TokenFile: filepath.Join(dir, "token", "token"), Egress: filepath.Join(dir, "egress.sock")}
	if ep != want {
		t.Fatalf("endpoint = %+v, want %+v", ep, want)
	}
	for path, perm := range map[string]fs.FileMode{
		filepath.Join(b.state, "runs"):  0o700,
		dir:                             0o700,
		filepath.Join(dir, "token"):     0o700,
		ep.TokenFile:                    0o600,
		filepath.Join(dir, "execution"): 0o600,
	} {
		if got := mode(t, path).Perm(); got != perm {
			t.Errorf("%s: mode %04o, want %04o", path, got, perm)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "execution")); string(got) != exe+"\n" {
		t.Errorf("execution file = %q", got)
	}
	if got, _ := os.ReadFile(ep.TokenFile); string(got) != "tok-one\n" {
		t.Errorf("token file = %q", got)
	}
	// Preparing again (a recovery) keeps the directory and rotates the token.
	if _, err := d.Prepare(exe, "tok-two"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(ep.TokenFile); string(got) != "tok-two\n" {
		t.Errorf("token file after a second Prepare = %q", got)
	}
	// A run directory left too open is tightened: it is the host's own.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Prepare(exe, "tok-three"); err != nil {
		t.Fatal(err)
	}
	if got := mode(t, dir).Perm(); got != 0o700 {
		t.Errorf("run directory mode after Prepare = %04o", got)
	}
}

func TestPrepareRefusesBadInput(t *testing.T) {
	d, b := setup(t)
	for _, tc := range []struct{ exe, token string }{
		{"", "tok"},
		{"exe_1\nexe_2", "tok"},
		{"exe_1", ""},
		{"exe_1", "secret\nline"},
	} {
		_, err := d.Prepare(tc.exe, tc.token)
		if err == nil {
			t.Errorf("Prepare(%q, %q) succeeded", tc.exe, tc.token)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("the error echoes the token: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(b.state, "runs", Key("exe_1"))); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused Prepare left a run directory (%v)", err)
	}
}

func TestTokenRotationThroughRename(t *testing.T) {
	d, _ := setup(t)
	ep, err := d.Prepare("exe_rot", "first-token")
	if err != nil {
		t.Fatal(err)
	}
	// A process that holds the token directory (as through a directory
	// mount) and one that pinned the old file (as a single-file bind mount
	// does).
	root, err := os.OpenRoot(filepath.Dir(ep.TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	pinned, err := os.Open(ep.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	defer pinned.Close()
	before, err := root.ReadFile("token")
	if err != nil {
		t.Fatal(err)
	}
	oldInode := inode(t, ep.TokenFile)

	if _, err := d.Prepare("exe_rot", "second-token"); err != nil {
		t.Fatal(err)
	}
	after, err := root.ReadFile("token")
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != "first-token\n" || string(after) != "second-token\n" {
		t.Fatalf("through the directory: before %q, after %q", before, after)
	}
	if newInode := inode(t, ep.TokenFile); newInode == oldInode {
		t.Fatalf("the rotated token reuses inode %d: it was written in place, not renamed", oldInode)
	}
	old, err := io.ReadAll(pinned)
	if err != nil {
		t.Fatal(err)
	}
	if string(old) != "first-token\n" {
		t.Fatalf("the pinned old file now reads %q: the old inode was rewritten", old)
	}
	if got := mode(t, ep.TokenFile).Perm(); got != 0o600 {
		t.Errorf("rotated token file mode %04o", got)
	}
	entries, _ := os.ReadDir(filepath.Dir(ep.TokenFile))
	if len(entries) != 1 {
		t.Errorf("token directory holds %d entries, want only the token: %v", len(entries), entries)
	}
}

func TestTokenRotationClearsStaleTemporaries(t *testing.T) {
	d, _ := setup(t)
	ep, err := d.Prepare("exe_tmp", "one")
	if err != nil {
		t.Fatal(err)
	}
	// A write an earlier daemon was killed in the middle of.
	stale := filepath.Join(filepath.Dir(ep.TokenFile), ".token-123")
	if err := os.WriteFile(stale, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Prepare("exe_tmp", "two"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stale temporary survived: %v", err)
	}
}

func TestExecutionFileMismatch(t *testing.T) {
	d, _ := setup(t)
	ep, err := d.Prepare("exe_mine", "tok")
	if err != nil {
		t.Fatal(err)
	}
	// The directory of exe_mine's key names another execution (a collision,
	// or a directory copied from elsewhere).
	if err := os.WriteFile(filepath.Join(ep.Dir, "execution"), []byte("exe_theirs\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = d.Prepare("exe_mine", "tok-2")
	if !errors.Is(err, ErrRunDirMismatch) {
		t.Fatalf("Prepare over another execution's directory: %v, want ErrRunDirMismatch", err)
	}
	for _, want := range []string{"exe_theirs", "exe_mine", ep.Dir} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if got, _ := os.ReadFile(ep.TokenFile); string(got) != "tok\n" {
		t.Errorf("the refused Prepare rewrote the token: %q", got)
	}
	if err := d.Serve("exe_mine", ep, echo("x")); err != nil {
		t.Fatal(err) // serving is not refused, the directory layout is the same
	}
	if err := d.Remove("exe_mine"); !errors.Is(err, ErrRunDirMismatch) {
		t.Errorf("Remove of another execution's directory: %v, want ErrRunDirMismatch", err)
	}
	if _, err := os.Stat(ep.Dir); err != nil {
		t.Errorf("the directory of another execution was removed: %v", err)
	}
}

// longState returns a state directory whose run socket path passes the
// limit.
func longState(t *testing.T) string {
	t.Helper()
	state := filepath.Join(shortTemp(t), strings.Repeat("s", 90))
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	return state
}

func TestShortPathFallback(t *testing.T) {
	state := longState(t)
	tmp := shortTemp(t)
	d, err := New(state, Options{TmpBase: tmp, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	defer d.CloseAll()
	const exe = "exe_long"
	ep, err := d.Prepare(exe, "tok")
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(tmp, fmt.Sprintf("open-conduit-%d", os.Getuid()))
	want := filepath.Join(base, Key(exe), "toolbelt.sock")
	if ep.Socket != want {
		t.Fatalf("socket = %s, want the fallback %s", ep.Socket, want)
	}
	if len(filepath.Join(ep.Dir, "toolbelt.sock")) <= MaxSocketPath {
		t.Fatal("the test's state directory is not long enough to need the fallback")
	}
	if ep.TokenFile != filepath.Join(state, "runs", Key(exe), "token", "token") {
		t.Errorf("the token left the run directory: %s", ep.TokenFile)
	}
	for _, dir := range []string{base, filepath.Dir(want)} {
		if got := mode(t, dir).Perm(); got != 0o700 {
			t.Errorf("%s: mode %04o, want 0700", dir, got)
		}
	}
	if err := d.Serve(exe, ep, echo("fallback")); err != nil {
		t.Fatal(err)
	}
	got, err := call(ep.Socket, "GET", "/v1/toolbelt/guidance", "")
	if err != nil {
		t.Fatal(err)
	}
	if got["tag"] != "fallback" || got["execution"] != exe {
		t.Errorf("through the fallback socket: %v", got)
	}
	if err := d.Remove(exe); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(want)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Remove left the fallback socket directory: %v", err)
	}
	if _, err := os.Stat(base); err != nil {
		t.Errorf("Remove took the shared fallback base: %v", err)
	}
}

func TestUnsafeFallbackRefused(t *testing.T) {
	const exe = "exe_unsafe"
	cases := []struct {
		name  string
		root  bool // needs root (chown)
		setup func(t *testing.T, base, keyDir string)
	}{
		{"base open to the group", false, func(t *testing.T, base, _ string) {
			mkdir(t, base, 0o750)
		}},
		{"key directory open to all", false, func(t *testing.T, base, keyDir string) {
			mkdir(t, base, 0o700)
			mkdir(t, keyDir, 0o777)
		}},
		{"base is a symlink", false, func(t *testing.T, base, _ string) {
			target := filepath.Join(filepath.Dir(base), "elsewhere")
			mkdir(t, target, 0o700)
			if err := os.Symlink(target, base); err != nil {
				t.Fatal(err)
			}
		}},
		{"base owned by another user", true, func(t *testing.T, base, _ string) {
			mkdir(t, base, 0o700)
			if err := os.Chown(base, 4242, 4242); err != nil {
				t.Fatal(err)
			}
		}},
		{"key directory owned by another user", true, func(t *testing.T, base, keyDir string) {
			mkdir(t, base, 0o700)
			mkdir(t, keyDir, 0o700)
			if err := os.Chown(keyDir, 4242, 4242); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root && os.Getuid() != 0 {
				t.Skip("chown to another user needs root")
			}
			tmp := shortTemp(t)
			d, err := New(longState(t), Options{TmpBase: tmp, Logger: discard})
			if err != nil {
				t.Fatal(err)
			}
			base := filepath.Join(tmp, fmt.Sprintf("open-conduit-%d", os.Getuid()))
			tc.setup(t, base, filepath.Join(base, Key(exe)))
			_, err = d.Prepare(exe, "tok")
			if !errors.Is(err, ErrEndpointUnavailable) || !errors.Is(err, ErrUnsafeDirectory) {
				t.Fatalf("Prepare = %v, want an unsafe-directory refusal", err)
			}
			if !strings.Contains(err.Error(), base) {
				t.Errorf("the error does not name the directory: %v", err)
			}
		})
	}
}

func mkdir(t *testing.T, path string, perm fs.FileMode) {
	t.Helper()
	if err := os.Mkdir(path, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil { // past the umask
		t.Fatal(err)
	}
}

func TestOverLongPath(t *testing.T) {
	longTmp := filepath.Join(shortTemp(t), strings.Repeat("t", 80))
	d, err := New(longState(t), Options{TmpBase: longTmp, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Prepare("exe_too_long", "tok")
	if !errors.Is(err, ErrEndpointUnavailable) {
		t.Fatalf("Prepare = %v, want ErrEndpointUnavailable", err)
	}
	msg := err.Error()
	for _, want := range []string{"toolbelt endpoint unavailable", filepath.Join(longTmp, fmt.Sprintf("open-conduit-%d", os.Getuid())), "shorter state directory"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	if _, err := os.Stat(longTmp); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused Prepare created the fallback base: %v", err)
	}
}

func TestServe(t *testing.T) {
	d, _ := setup(t)
	ep, err := d.Prepare("exe_serve", "tok")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Serve("exe_serve", ep, echo("one")); err != nil {
		t.Fatal(err)
	}
	m := mode(t, ep.Socket)
	if m.Type() != fs.ModeSocket || m.Perm() != 0o600 {
		t.Fatalf("socket mode = %v, want a socket with 0600", m)
	}
	got, err := call(ep.Socket, "POST", "/v1/toolbelt/call", `{"operation":"emit"}`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"tag": "one", "execution": "exe_serve", "method": "POST", "path": "/v1/toolbelt/call", "body": `{"operation":"emit"}`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("echo = %v, want %v", got, want)
	}
	if !d.Serving("exe_serve") {
		t.Error("Serving = false while served")
	}
	// Serving again on the same socket swaps the handler and keeps it.
	if err := d.Serve("exe_serve", ep, echo("two")); err != nil {
		t.Fatal(err)
	}
	if got, err := call(ep.Socket, "GET", "/", ""); err != nil || got["tag"] != "two" {
		t.Fatalf("after a second Serve: %v, %v", got, err)
	}
	// A socket removed from under the server is bound afresh.
	if err := os.Remove(ep.Socket); err != nil {
		t.Fatal(err)
	}
	if err := d.Serve("exe_serve", ep, echo("three")); err != nil {
		t.Fatal(err)
	}
	if got, err := call(ep.Socket, "GET", "/", ""); err != nil || got["tag"] != "three" {
		t.Fatalf("after the socket file was removed: %v, %v", got, err)
	}
	// Another execution's socket is refused.
	other, err := d.Prepare("exe_other", "tok")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Serve("exe_serve", other, echo("x")); err == nil {
		t.Error("Serve accepted another execution's endpoint")
	}
}

func TestServeStaleSocket(t *testing.T) {
	d, _ := setup(t)
	ep, err := d.Prepare("exe_stale", "tok")
	if err != nil {
		t.Fatal(err)
	}
	// A socket an earlier, killed daemon left behind.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: ep.Socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Lstat(ep.Socket); err != nil {
		t.Fatal("the stale socket is not there:", err)
	}
	if err := d.Serve("exe_stale", ep, echo("new")); err != nil {
		t.Fatalf("Serve over a stale socket: %v", err)
	}
	if got, err := call(ep.Socket, "GET", "/", ""); err != nil || got["tag"] != "new" {
		t.Fatalf("after replacing the stale socket: %v, %v", got, err)
	}
}

func TestServeRefusesOccupiedPath(t *testing.T) {
	d, _ := setup(t)
	t.Run("another process listens", func(t *testing.T) {
		ep, err := d.Prepare("exe_busy", "tok")
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("unix", ep.Socket)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		if err := d.Serve("exe_busy", ep, echo("x")); !errors.Is(err, ErrEndpointUnavailable) {
			t.Fatalf("Serve on a live socket = %v, want ErrEndpointUnavailable", err)
		}
	})
	t.Run("a file is there", func(t *testing.T) {
		ep, err := d.Prepare("exe_file", "tok")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(ep.Socket, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := d.Serve("exe_file", ep, echo("x")); !errors.Is(err, ErrEndpointUnavailable) {
			t.Fatalf("Serve over a file = %v, want ErrEndpointUnavailable", err)
		}
		if _, err := os.Stat(ep.Socket); err != nil {
			t.Errorf("the file was removed: %v", err)
		}
	})
}

func TestClose(t *testing.T) {
	d, _ := setup(t)
	ep, err := d.Prepare("exe_close", "tok")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Serve("exe_close", ep, echo("x")); err != nil {
		t.Fatal(err)
	}
	d.Close("exe_close")
	if _, err := call(ep.Socket, "GET", "/", ""); err == nil {
		t.Fatal("the socket still answers after Close")
	}
	if _, err := os.Lstat(ep.Socket); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the socket file survived Close: %v", err)
	}
	if _, err := os.Stat(ep.TokenFile); err != nil {
		t.Errorf("Close removed the token: %v", err)
	}
	if d.Serving("exe_close") {
		t.Error("Serving = true after Close")
	}
	d.Close("exe_close") // closing twice is harmless
	if err := d.Serve("exe_close", ep, echo("again")); err != nil {
		t.Fatal(err)
	}
	if got, err := call(ep.Socket, "GET", "/", ""); err != nil || got["tag"] != "again" {
		t.Fatalf("served again after Close: %v, %v", got, err)
	}
	// A socket someone else bound at the path after ours was removed
	// survives our Close.
	if err := os.Remove(ep.Socket); err != nil {
		t.Fatal(err)
	}
	foreign, err := net.Listen("unix", ep.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer foreign.Close()
	d.Close("exe_close")
	if m := mode(t, ep.Socket); m.Type() != fs.ModeSocket {
		t.Errorf("Close removed a socket it did not bind (%v)", m)
	}
}

func TestCloseAllKeepsDirectories(t *testing.T) {
	d, _ := setup(t)
	var eps []Endpoint
	for _, exe := range []string{"exe_a", "exe_b"} {
		ep, err := d.Prepare(exe, "tok")
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Serve(exe, ep, echo(exe)); err != nil {
			t.Fatal(err)
		}
		eps = append(eps, ep)
	}
	d.CloseAll()
	for _, ep := range eps {
		if _, err := call(ep.Socket, "GET", "/", ""); err == nil {
			t.Errorf("%s still answers after CloseAll", ep.Socket)
		}
		if got, err := os.ReadFile(ep.TokenFile); err != nil || string(got) != "tok\n" {
			t.Errorf("CloseAll lost the token of %s: %q, %v", ep.Dir, got, err)
		}
	}
	// The next daemon serves them again from the same directories.
	d2, err := New(filepath.Dir(filepath.Dir(eps[0].Dir)), Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.CloseAll()
	ep, err := d2.Prepare("exe_a", "rotated")
	if err != nil {
		t.Fatal(err)
	}
	if ep != eps[0] {
		t.Fatalf("the next daemon's endpoint %+v differs from %+v", ep, eps[0])
	}
	if err := d2.Serve("exe_a", ep, echo("next")); err != nil {
		t.Fatal(err)
	}
	if got, err := call(ep.Socket, "GET", "/", ""); err != nil || got["tag"] != "next" {
		t.Fatalf("the next daemon's socket: %v, %v", got, err)
	}
}

func TestRemove(t *testing.T) {
	d, b := setup(t)
	ep, err := d.Prepare("exe_rm", "tok")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Serve("exe_rm", ep, echo("x")); err != nil {
		t.Fatal(err)
	}
	keep, err := d.Prepare("exe_keep", "tok")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Remove("exe_rm"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ep.Dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the run directory survived Remove: %v", err)
	}
	if _, err := call(ep.Socket, "GET", "/", ""); err == nil {
		t.Error("the socket still answers after Remove")
	}
	if d.Serving("exe_rm") {
		t.Error("Serving = true after Remove")
	}
	if _, err := os.Stat(keep.Dir); err != nil {
		t.Errorf("Remove took another execution's directory: %v", err)
	}
	if err := d.Remove("exe_never"); err != nil {
		t.Errorf("Remove of an execution without a directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(b.state, "runs")); err != nil {
		t.Errorf("Remove took runs/: %v", err)
	}
}

func TestSweep(t *testing.T) {
	d, b := setup(t)
	prepare := func(d *Dirs, exe string, serve bool) Endpoint {
		t.Helper()
		ep, err := d.Prepare(exe, "tok")
		if err != nil {
			t.Fatal(err)
		}
		if serve {
			if err := d.Serve(exe, ep, echo(exe)); err != nil {
				t.Fatal(err)
			}
		}
		return ep
	}
	running := prepare(d, "exe_running", true)
	parked := prepare(d, "exe_parked", false)
	finished := prepare(d, "exe_finished", true)
	// An earlier daemon's directory: a Dirs over the same state that is
	// gone now.
	earlier, err := New(b.state, Options{TmpBase: b.tmp, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	gone := prepare(earlier, "exe_gone", false)
	runs := filepath.Join(b.state, "runs")
	noExec := filepath.Join(runs, "0123456789abcdef")
	mkdir(t, noExec, 0o700)
	stray := filepath.Join(runs, "stray")
	if err := os.WriteFile(stray, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A directory whose name is not the key of the execution it names.
	misnamed := filepath.Join(runs, "fedcba9876543210")
	mkdir(t, misnamed, 0o700)
	if err := os.WriteFile(filepath.Join(misnamed, "execution"), []byte("exe_running\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	live := map[string]bool{"exe_running": true, "exe_parked": true}
	var asked []string
	swept, err := d.Sweep(func(exe string) bool {
		asked = append(asked, exe)
		return live[exe]
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range swept {
		got = append(got, s.Key+"="+s.ExecutionID)
	}
	slices.Sort(got)
	want := []string{
		"0123456789abcdef=",
		Key("exe_finished") + "=exe_finished",
		Key("exe_gone") + "=exe_gone",
		"fedcba9876543210=exe_running",
		"stray=",
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("swept %v, want %v", got, want)
	}
	slices.Sort(asked)
	if !slices.Equal(asked, []string{"exe_finished", "exe_gone", "exe_parked", "exe_running"}) {
		t.Errorf("keep was asked about %v", asked)
	}
	for _, p := range []string{finished.Dir, gone.Dir, noExec, stray, misnamed} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s survived the sweep: %v", p, err)
		}
	}
	for _, p := range []string{running.TokenFile, parked.TokenFile} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("the sweep took a kept execution's %s: %v", p, err)
		}
	}
	if _, err := call(finished.Socket, "GET", "/", ""); err == nil {
		t.Error("a swept execution's socket still answers")
	}
	if d.Serving("exe_finished") {
		t.Error("Serving = true for a swept execution")
	}
	if got, err := call(running.Socket, "GET", "/", ""); err != nil || got["execution"] != "exe_running" {
		t.Errorf("a kept execution's socket: %v, %v", got, err)
	}
}

func TestSweepWithoutRunsDirectory(t *testing.T) {
	d, _ := setup(t)
	swept, err := d.Sweep(func(string) bool { return false })
	if err != nil || len(swept) != 0 {
		t.Fatalf("Sweep of a fresh state directory = %v, %v", swept, err)
	}
}

func TestSweepRemovesFallbackDirectory(t *testing.T) {
	tmp := shortTemp(t)
	d, err := New(longState(t), Options{TmpBase: tmp, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	defer d.CloseAll()
	ep, err := d.Prepare("exe_fb", "tok")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Serve("exe_fb", ep, echo("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Sweep(func(string) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(ep.Socket)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the fallback socket directory survived the sweep: %v", err)
	}
}

func TestServeRechecksFallbackDirectory(t *testing.T) {
	d, err := New(longState(t), Options{TmpBase: shortTemp(t), Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	defer d.CloseAll()
	ep, err := d.Prepare("exe_opened", "tok")
	if err != nil {
		t.Fatal(err)
	}
	// Opened to others between Prepare and Serve.
	if err := os.Chmod(filepath.Dir(ep.Socket), 0o755); err != nil {
		t.Fatal(err)
	}
	err = d.Serve("exe_opened", ep, echo("x"))
	if !errors.Is(err, ErrEndpointUnavailable) || !errors.Is(err, ErrUnsafeDirectory) {
		t.Fatalf("Serve in an opened directory = %v, want an unsafe-directory refusal", err)
	}
	if got := mode(t, filepath.Dir(ep.Socket)).Perm(); got != 0o755 {
		t.Errorf("Serve changed the shared directory's mode to %04o", got)
	}
}
