package config

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	gokeyring "github.com/zalando/go-keyring"
	"golang.org/x/sys/unix"
)

// guard bounds waits for real processes; it only ever fails a broken test.
const guard = 30 * time.Second

func codeOf(err error) string {
	var se *SecretError
	if errors.As(err, &se) {
		return se.Code
	}
	return "not a SecretError: " + err.Error()
}

func envOf(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

type resolveCase struct {
	name string
	ref  string
	want string // the secret, when code is ""
	code string
}

func runResolve(t *testing.T, r *Resolver, cases []resolveCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := r.Resolve(context.Background(), c.ref)
			if c.code == "" {
				if err != nil || v != c.want {
					t.Fatalf("Resolve = %q, %v; want %q", v, err, c.want)
				}
				return
			}
			if err == nil || codeOf(err) != c.code {
				t.Fatalf("Resolve = %q, %v; want code %s", v, err, c.code)
			}
			if v != "" {
				t.Fatalf("a value came back with the error")
			}
		})
	}
}

func TestResolveInvalidReference(t *testing.T) {
	runResolve(t, &Resolver{}, []resolveCase{
		{"no scheme", "GH_TOKEN", "", SecretInvalidReference},
		{"unknown scheme", "vault:x", "", SecretInvalidReference},
		{"env malformed", "env:A-B", "", SecretInvalidReference},
		{"keyring without user", "keyring:svc", "", SecretInvalidReference},
		{"file with a slash", "file:a/b", "", SecretInvalidReference},
		{"cmd empty", "cmd:", "", SecretInvalidReference},
	})
}

func TestResolveEnv(t *testing.T) {
	r := &Resolver{LookupEnv: envOf(map[string]string{"GH_TOKEN": "ghp_1", "EMPTY": ""})}
	runResolve(t, r, []resolveCase{
		{"set", "env:GH_TOKEN", "ghp_1", ""},
		{"missing variable", "env:NOT_SET", "", SecretNotFound},
		{"empty variable", "env:EMPTY", "", SecretEmpty},
	})
	// The default reads the process environment, each time.
	t.Setenv("OC_TEST_SECRET", "first")
	d := &Resolver{}
	if v, err := d.Resolve(context.Background(), "env:OC_TEST_SECRET"); err != nil || v != "first" {
		t.Fatalf("%q %v", v, err)
	}
	t.Setenv("OC_TEST_SECRET", "second")
	if v, _ := d.Resolve(context.Background(), "env:OC_TEST_SECRET"); v != "second" {
		t.Fatalf("a resolution was cached: %q", v)
	}
}

func writeSecrets(t *testing.T, dir, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, SecretsFileName)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestResolveFile(t *testing.T) {
	good := t.TempDir()
	path := writeSecrets(t, good, `{"db_password": "hunter2", "empty": "", "n": "x"}`, 0o600)
	runResolve(t, &Resolver{StateDir: good}, []resolveCase{
		{"owner-only file", "file:db_password", "hunter2", ""},
		{"missing key", "file:nope", "", SecretNotFound},
		{"empty value", "file:empty", "", SecretEmpty},
	})
	// No caching: a changed file is read again.
	if err := os.WriteFile(path, []byte(`{"db_password": "changed"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if v, _ := (&Resolver{StateDir: good}).Resolve(context.Background(), "file:db_password"); v != "changed" {
		t.Fatalf("a resolution was cached: %q", v)
	}

	unsafe := func(mode os.FileMode) string {
		d := t.TempDir()
		writeSecrets(t, d, `{"k": "v"}`, mode)
		return d
	}
	for _, c := range []struct {
		name string
		dir  string
		code string
	}{
		{"group-readable", unsafe(0o640), SecretUnsafeFile},
		{"world-readable", unsafe(0o604), SecretUnsafeFile},
		{"group-writable", unsafe(0o620), SecretUnsafeFile},
		{"missing file", t.TempDir(), SecretUnreadable},
		{"no state directory", "", SecretUnreadable},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := (&Resolver{StateDir: c.dir}).Resolve(context.Background(), "file:k")
			if codeOf(err) != c.code {
				t.Fatalf("got %v, want %s", err, c.code)
			}
		})
	}
	t.Run("symbolic link", func(t *testing.T) {
		d := t.TempDir()
		target := filepath.Join(t.TempDir(), "real.json")
		if err := os.WriteFile(target, []byte(`{"k": "v"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(d, SecretsFileName)); err != nil {
			t.Fatal(err)
		}
		if _, err := (&Resolver{StateDir: d}).Resolve(context.Background(), "file:k"); codeOf(err) != SecretUnsafeFile {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("not a regular file", func(t *testing.T) {
		d := t.TempDir()
		if err := syscall.Mkfifo(filepath.Join(d, SecretsFileName), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := (&Resolver{StateDir: d}).Resolve(context.Background(), "file:k"); codeOf(err) != SecretUnsafeFile {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("owned by another user", func(t *testing.T) {
		if os.Getuid() != 0 {
			t.Skip("changing a file's owner needs root")
		}
		d := t.TempDir()
		p := writeSecrets(t, d, `{"k": "v"}`, 0o600)
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if _, err := (&Resolver{StateDir: d}).Resolve(context.Background(), "file:k"); codeOf(err) != SecretUnsafeFile {
			t.Fatalf("got %v", err)
		}
	})
	for name, content := range map[string]string{
		"not JSON":         `k=v`,
		"not an object":    `["v"]`,
		"a non-string":     `{"k": 1}`,
		"a repeated key":   `{"k": "v", "k": "w"}`,
		"null":             `null`,
		"trailing garbage": `{"k": "v"} x`,
	} {
		t.Run(name, func(t *testing.T) {
			d := t.TempDir()
			writeSecrets(t, d, content, 0o600)
			if _, err := (&Resolver{StateDir: d}).Resolve(context.Background(), "file:k"); codeOf(err) != SecretUnreadable {
				t.Fatalf("got %v", err)
			}
		})
	}
	t.Run("larger than 1 MiB", func(t *testing.T) {
		d := t.TempDir()
		writeSecrets(t, d, `{"k": "`+strings.Repeat("a", 1<<20)+`"}`, 0o600)
		if _, err := (&Resolver{StateDir: d}).Resolve(context.Background(), "file:k"); codeOf(err) != SecretTooLarge {
			t.Fatalf("got %v", err)
		}
	})
}

// blockingKeyring never answers until released.
type blockingKeyring struct{ release chan struct{} }

func (b blockingKeyring) Get(string, string) (string, error) {
	<-b.release
	return "late", nil
}

type failingKeyring struct{}

func (failingKeyring) Get(string, string) (string, error) {
	return "", errors.New("dbus: no session bus")
}

func TestResolveKeyring(t *testing.T) {
	r := &Resolver{Keyring: memKeyring{"open-conduit/slack": "xoxb-1", "open-conduit/empty": "", "svc/a/b": "nested"}}
	runResolve(t, r, []resolveCase{
		{"present", "keyring:open-conduit/slack", "xoxb-1", ""},
		{"user with a slash", "keyring:svc/a/b", "nested", ""},
		{"missing item", "keyring:open-conduit/nope", "", SecretNotFound},
		{"empty item", "keyring:open-conduit/empty", "", SecretEmpty},
	})
	runResolve(t, &Resolver{Keyring: failingKeyring{}}, []resolveCase{
		{"keyring down", "keyring:open-conduit/slack", "", KeyringUnavailable},
	})
	t.Run("caller gives up", func(t *testing.T) {
		b := blockingKeyring{release: make(chan struct{})}
		defer close(b.release)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := (&Resolver{Keyring: b}).Resolve(ctx, "keyring:svc/u")
			done <- err
		}()
		cancel()
		select {
		case err := <-done:
			if codeOf(err) != SecretCancelled || !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v", err)
			}
		case <-time.After(guard):
			t.Fatal("Resolve did not return when its context ended")
		}
	})
}

// TestSystemKeyring runs the real adapter over go-keyring's in-memory
// provider: no platform keyring runs here.
func TestSystemKeyring(t *testing.T) {
	gokeyring.MockInit()
	if err := gokeyring.Set("open-conduit", "slack", "xoxb-2"); err != nil {
		t.Fatal(err)
	}
	r := &Resolver{Keyring: SystemKeyring{}}
	runResolve(t, r, []resolveCase{
		{"present", "keyring:open-conduit/slack", "xoxb-2", ""},
		{"missing", "keyring:open-conduit/other", "", SecretNotFound},
	})
	gokeyring.MockInitWithError(errors.New("no keyring"))
	runResolve(t, r, []resolveCase{{"unavailable", "keyring:open-conduit/slack", "", KeyringUnavailable}})
	gokeyring.MockInit()
}

func TestResolveCommand(t *testing.T) {
	state := t.TempDir()
	r := &Resolver{StateDir: state, LookupEnv: envOf(map[string]string{"PATH": "/usr/bin:/bin", "HOME": "/home/oc"})}
	runResolve(t, r, []resolveCase{
		{"trailing LF trimmed", `cmd:printf 'abc\n'`, "abc", ""},
		{"trailing CRLF trimmed", `cmd:printf 'abc\r\n'`, "abc", ""},
		{"only one LF trimmed", `cmd:printf 'abc\n\n'`, "abc\n", ""},
		{"a lone CR kept", `cmd:printf 'abc\r'`, "abc\r", ""},
		{"no newline", `cmd:printf abc`, "abc", ""},
		{"inner lines kept", `cmd:printf 'a\nb\n'`, "a\nb", ""},
		{"stderr discarded", `cmd:echo noise >&2; printf ok`, "ok", ""},
		{"runs in the state directory", `cmd:pwd`, state, ""},
		{"exactly 64 KiB", `cmd:head -c 65536 /dev/zero | tr '\0' a`, strings.Repeat("a", 65536), ""},
		{"empty output", `cmd:true`, "", SecretEmpty},
		{"only a newline", `cmd:echo`, "", SecretEmpty},
		{"non-zero exit", `cmd:printf secret; exit 3`, "", SecretCommandFailed},
		{"killed by a signal", `cmd:kill -9 $$`, "", SecretCommandFailed},
		{"one byte over 64 KiB", `cmd:head -c 65537 /dev/zero | tr '\0' a`, "", SecretTooLarge},
		{"missing program", `cmd:no-such-program-oc`, "", SecretCommandFailed},
	})
	t.Run("stdin is empty", func(t *testing.T) {
		v, err := r.Resolve(context.Background(), "cmd:cat; printf x")
		if err != nil || v != "x" {
			t.Fatalf("%q %v", v, err)
		}
	})
}

// TestResolveCommandEnvironment: the command sees PATH and HOME and nothing
// of the daemon's own environment, toolbelt or Open Conduit variables.
func TestResolveCommandEnvironment(t *testing.T) {
	t.Setenv("OPEN_CONDUIT_CANARY", "oc-canary")
	t.Setenv("OS_TOKEN_FILE", "/tmp/token-canary")
	t.Setenv("OS_ENDPOINT", "/tmp/endpoint-canary")
	t.Setenv("SOME_DAEMON_VAR", "daemon-canary")
	t.Setenv("PATH", "/usr/bin:/bin")
	t.Setenv("HOME", "/home/oc-test")
	v, err := (&Resolver{StateDir: t.TempDir()}).Resolve(context.Background(), "cmd:env")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(v, "\n") {
		name, _, _ := strings.Cut(line, "=")
		names = append(names, name)
	}
	slices.Sort(names)
	// PWD is the shell's own, set from the working directory.
	if want := []string{"HOME", "PATH", "PWD"}; !slices.Equal(names, want) {
		t.Fatalf("environment %v, want %v", names, want)
	}
	if !strings.Contains(v, "PATH=/usr/bin:/bin") || !strings.Contains(v, "HOME=/home/oc-test") {
		t.Fatalf("environment %q", v)
	}
	if strings.Contains(v, "canary") {
		t.Fatal("a daemon variable reached the command")
	}
}

// TestResolveCommandOutputFlood: a command that never stops printing is
// stopped at the cap, long before its deadline.
func TestResolveCommandOutputFlood(t *testing.T) {
	r := &Resolver{CommandTimeout: time.Hour}
	done := make(chan error, 1)
	go func() {
		_, err := r.Resolve(context.Background(), "cmd:yes")
		done <- err
	}()
	select {
	case err := <-done:
		if codeOf(err) != SecretTooLarge {
			t.Fatalf("got %v", err)
		}
	case <-time.After(guard):
		t.Fatal("a flooding command was not stopped at the cap")
	}
}

// TestResolveCommandTimeoutKillsTheGroup: at the deadline the whole process
// group dies, even a shell that ignores SIGTERM and the child it started in
// the background. The test makes itself a subreaper so that the orphaned
// child becomes its own, and waits on that real process.
func TestResolveCommandTimeoutKillsTheGroup(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("cannot become a subreaper: %v", err)
	}
	state := t.TempDir()
	fifo := filepath.Join(state, "ready")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// The deadline is a channel the test fires once the command runs; the
	// default is checked below.
	fire := make(chan time.Time, 1)
	var asked time.Duration
	r := &Resolver{StateDir: state, After: func(d time.Duration) <-chan time.Time { asked = d; return fire }}
	done := make(chan error, 1)
	go func() {
		_, err := r.Resolve(context.Background(), "cmd:trap '' TERM; sleep 300 & echo $! > child.pid; echo up > ready; wait; printf never")
		done <- err
	}()
	f, err := os.Open(fifo) // blocks until the command opens it
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(f).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	f.Close()
	fire <- time.Now()
	select {
	case err = <-done:
	case <-time.After(guard):
		t.Fatal("Resolve did not return when its deadline fired")
	}
	if codeOf(err) != SecretTimeout {
		t.Fatalf("got %v, want %s", err, SecretTimeout)
	}
	if asked != DefaultCommandTimeout {
		t.Fatalf("the deadline asked for was %v, want %v", asked, DefaultCommandTimeout)
	}
	raw, rerr := os.ReadFile(filepath.Join(state, "child.pid"))
	if rerr != nil {
		t.Fatalf("the command did not record its child: %v", rerr)
	}
	pid, perr := strconv.Atoi(strings.TrimSpace(string(raw)))
	if perr != nil {
		t.Fatal(perr)
	}
	waited := make(chan syscall.WaitStatus, 1)
	go func() {
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
			t.Errorf("wait for the background child: %v", err)
		}
		waited <- ws
	}()
	select {
	case ws := <-waited:
		if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("the background child ended with %v, not SIGKILL", ws)
		}
	case <-time.After(guard):
		t.Fatal("the background child outlived the deadline: the process group was not killed")
	}
	if got := (&Resolver{}).commandTimeout(); got != 10*time.Second {
		t.Fatalf("default deadline %v", got)
	}
}

// TestResolveCommandLeftoversDoNotHoldTheAnswer: when the command ends,
// whatever it left running in its group is killed and what it printed is
// the secret, even if a leftover still held its standard output. The
// deadline never fires here: the answer must not wait for it.
func TestResolveCommandLeftoversDoNotHoldTheAnswer(t *testing.T) {
	fire := make(chan time.Time, 1)
	defer func() { fire <- time.Now() }() // frees a broken Resolve
	r := &Resolver{StateDir: t.TempDir(), After: func(time.Duration) <-chan time.Time { return fire }}
	type answer struct {
		v   string
		err error
	}
	done := make(chan answer, 1)
	go func() {
		v, err := r.Resolve(context.Background(), "cmd:sleep 300 & printf s3cret")
		done <- answer{v, err}
	}()
	select {
	case a := <-done:
		if a.err != nil || a.v != "s3cret" {
			t.Fatalf("Resolve = %q, %v; want the printed secret", a.v, a.err)
		}
	case <-time.After(guard):
		t.Fatal("Resolve waited for a background job the command left behind instead of ending with the command")
	}
}

// TestResolveCommandCancelled: the caller's context ending kills the
// group too.
func TestResolveCommandCancelled(t *testing.T) {
	state := t.TempDir()
	fifo := filepath.Join(state, "ready")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := (&Resolver{StateDir: state}).Resolve(ctx, "cmd:echo up > ready; exec sleep 300")
		done <- err
	}()
	f, err := os.Open(fifo) // blocks until the command opens it
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(f).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	f.Close()
	cancel()
	select {
	case err := <-done:
		if codeOf(err) != SecretCancelled || !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v", err)
		}
	case <-time.After(guard):
		t.Fatal("Resolve did not return when its context ended")
	}
	if _, err := (&Resolver{}).Resolve(ctx, "env:HOME"); codeOf(err) != SecretCancelled {
		t.Fatalf("a cancelled context resolved: %v", err)
	}
}
