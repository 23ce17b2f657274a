package statedir_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/open-conduit/open-conduit/internal/statedir"
)

func TestPrepareStateDirCreatesOwnerOnly(t *testing.T) {
	base := newStateDir(t)
	dir := filepath.Join(base, "a", "state")
	if err := statedir.Prepare(dir); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o700 {
		t.Fatalf("state directory mode = %04o, want 0700", got)
	}
	// Preparing it again is fine.
	if err := statedir.Prepare(dir); err != nil {
		t.Fatal(err)
	}
}

func TestUnsafeStateDirsAreRefused(t *testing.T) {
	cases := []struct {
		name    string
		mode    os.FileMode
		wantFix string
	}{
		{"group readable", 0o750, "chmod 700"},
		{"group writable", 0o770, "chmod 700"},
		{"world readable", 0o705, "chmod 700"},
		{"world writable", 0o707, "chmod 700"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(newStateDir(t), "state")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, tc.mode); err != nil {
				t.Fatal(err)
			}
			for what, err := range map[string]error{
				"PrepareStateDir": statedir.Prepare(dir),
				"AcquireLock":     lockErr(dir),
			} {
				var ue *statedir.UnsafeDirError
				if !errors.As(err, &ue) {
					t.Fatalf("%s(%04o) = %v, want *UnsafeDirError", what, tc.mode, err)
				}
				msg := err.Error()
				if !strings.Contains(msg, dir) || !strings.Contains(msg, tc.wantFix+" "+dir) {
					t.Errorf("%s error %q does not name the path and the fix", what, msg)
				}
			}
		})
	}
}

func lockErr(dir string) error {
	l, err := statedir.AcquireLock(dir)
	if err == nil {
		l.Close()
	}
	return err
}

func TestForeignOwnedStateDirIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a directory to another user")
	}
	dir := filepath.Join(newStateDir(t), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	err := statedir.Prepare(dir)
	var ue *statedir.UnsafeDirError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "uid 65534") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("PrepareStateDir on a foreign directory = %v, want a refusal naming the owner and path", err)
	}
	if _, err := statedir.AcquireLock(dir); !errors.As(err, &ue) {
		t.Fatalf("AcquireLock on a foreign directory = %v, want *UnsafeDirError", err)
	}
}

func TestStateDirThatIsAFileIsRefused(t *testing.T) {
	path := filepath.Join(newStateDir(t), "file")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := statedir.Prepare(path); err == nil {
		t.Fatal("PrepareStateDir accepted a regular file")
	}
}

// The refusal names the holder even in the moment between the holder's
// flock and its pid's write (the lock taken, the file still empty).
func TestLockRefusalNamesAHolderThatHasNotWrittenItsPID(t *testing.T) {
	dir := newStateDir(t)
	f, err := os.OpenFile(filepath.Join(dir, statedir.LockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	_, err = statedir.AcquireLock(dir)
	var held *statedir.LockHeldError
	if !errors.As(err, &held) || held.PID != os.Getpid() || !strings.Contains(err.Error(), "process "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("AcquireLock = %v, want a refusal naming pid %d", err, os.Getpid())
	}
}

func TestLockExclusionNamesHolder(t *testing.T) {
	dir := newStateDir(t)
	first, err := statedir.AcquireLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, statedir.LockFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("lock file holds %q, want our pid %d", b, os.Getpid())
	}
	_, err = statedir.AcquireLock(dir)
	var held *statedir.LockHeldError
	if !errors.As(err, &held) {
		t.Fatalf("second AcquireLock = %v, want *LockHeldError", err)
	}
	if held.PID != os.Getpid() || !strings.Contains(err.Error(), "process "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second AcquireLock error %q does not name holder pid %d", err, os.Getpid())
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if first.Held() {
		t.Fatal("lock still held after Close")
	}
	again, err := statedir.AcquireLock(dir)
	if err != nil {
		t.Fatalf("AcquireLock after release: %v", err)
	}
	again.Close()
}

func TestListenSocketMode(t *testing.T) {
	dir := newStateDir(t)
	lock := mustLock(t, dir)
	sock := filepath.Join(dir, statedir.SocketName)
	l, err := statedir.Listen(sock, lock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fi, err := os.Lstat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode = %v, want a socket with 0600", fi.Mode())
	}
}

func mustLock(t *testing.T, dir string) *statedir.Lock {
	t.Helper()
	lock, err := statedir.AcquireLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() })
	return lock
}

// leaveStaleSocket binds a socket at path and closes it without removing
// the file, as a killed daemon leaves it.
func leaveStaleSocket(t *testing.T, path string) {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	if fi, err := os.Lstat(path); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("stale socket not left at %s: %v", path, err)
	}
}

func TestStaleSocketReplacedOnlyUnderLock(t *testing.T) {
	dir := newStateDir(t)
	sock := filepath.Join(dir, statedir.SocketName)
	leaveStaleSocket(t, sock)

	// Without the lock (never taken, or released), nothing is touched.
	lock := mustLock(t, dir)
	lock.Close()
	if _, err := statedir.Listen(sock, lock); err == nil || !strings.Contains(err.Error(), "lock") {
		t.Fatalf("Listen with a released lock = %v, want a refusal naming the lock", err)
	}
	if _, err := statedir.Listen(sock, nil); err == nil {
		t.Fatal("Listen without a lock succeeded")
	}
	if _, err := os.Lstat(sock); err != nil {
		t.Fatalf("stale socket removed without the lock: %v", err)
	}

	lock = mustLock(t, dir)
	l, err := statedir.Listen(sock, lock)
	if err != nil {
		t.Fatalf("Listen over a stale socket under the lock: %v", err)
	}
	defer l.Close()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("dialing the new socket: %v", err)
	}
	c.Close()
}

func TestListenRefusesWhatIsNotOurSocket(t *testing.T) {
	dir := newStateDir(t)
	lock := mustLock(t, dir)
	file := filepath.Join(dir, "not-a-socket")
	if err := os.WriteFile(file, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := statedir.Listen(file, lock); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("Listen over a regular file = %v, want a refusal", err)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "keep me" {
		t.Fatalf("regular file was touched: %q %v", b, err)
	}

	if os.Geteuid() != 0 {
		t.Skip("needs root to give a socket to another user")
	}
	foreign := filepath.Join(dir, "foreign.sock")
	leaveStaleSocket(t, foreign)
	if err := os.Lchown(foreign, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := statedir.Listen(foreign, lock); err == nil || !strings.Contains(err.Error(), "another user") {
		t.Fatalf("Listen over a foreign socket = %v, want a refusal", err)
	}
	if _, err := os.Lstat(foreign); err != nil {
		t.Fatalf("foreign socket was removed: %v", err)
	}
}

func TestListenRefusesLongPath(t *testing.T) {
	dir := newStateDir(t)
	lock := mustLock(t, dir)
	long := filepath.Join(dir, strings.Repeat("d", statedir.MaxSocketPath), statedir.SocketName)
	_, err := statedir.Listen(long, lock)
	if err == nil {
		t.Fatal("Listen accepted an over-long path")
	}
	if !strings.Contains(err.Error(), long) || !strings.Contains(err.Error(), "shorter state directory") {
		t.Fatalf("error %q does not name the path and ask for a shorter state directory", err)
	}
	// Exactly at the limit is fine.
	exact := filepath.Join(dir, strings.Repeat("s", statedir.MaxSocketPath-len(dir)-1))
	if len(exact) != statedir.MaxSocketPath {
		t.Fatalf("test path is %d bytes", len(exact))
	}
	l, err := statedir.Listen(exact, lock)
	if err != nil {
		t.Fatalf("Listen at exactly %d bytes: %v", statedir.MaxSocketPath, err)
	}
	l.Close()
}

// newStateDir makes a short owner-only directory (short enough for a
// socket path) removed when the test ends.
func newStateDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "oc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
