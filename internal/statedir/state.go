package statedir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// LockFile is the name of the lock file inside the state directory.
const LockFile = "daemon.lock"

// UnsafeDirError says why a directory that must be owner-only is refused
// and how to fix it.
type UnsafeDirError struct {
	Path   string
	Reason string
	Fix    string
}

func (e *UnsafeDirError) Error() string {
	return fmt.Sprintf("refusing state directory %s: %s; %s", e.Path, e.Reason, e.Fix)
}

// Prepare creates the state directory (and missing parents) with
// mode 0700 and checks that it is safe: a directory, owned by the effective
// user, with no group or world access. A refusal is an *UnsafeDirError
// naming the path and the fix.
func Prepare(path string) error {
	if path == "" {
		return errors.New("no state directory given: pass --state DIR or set OPEN_CONDUIT_STATE")
	}
	if err := os.MkdirAll(path, 0o700); err != nil {
		return fmt.Errorf("cannot create state directory %s: %w; choose a directory you can write (--state DIR)", path, err)
	}
	return CheckPrivateDir(path)
}

// CheckPrivateDir checks that path is a directory owned by the effective
// user with no group or world permission bits.
func CheckPrivateDir(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("cannot inspect directory %s: %w", path, err)
	}
	if !fi.IsDir() {
		return &UnsafeDirError{Path: path, Reason: "it is not a directory", Fix: "choose a directory (--state DIR)"}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return &UnsafeDirError{Path: path, Reason: "its owner cannot be determined", Fix: "choose a directory on a local file system"}
	}
	if uid := os.Geteuid(); int(st.Uid) != uid {
		return &UnsafeDirError{
			Path:   path,
			Reason: fmt.Sprintf("it is owned by uid %d, not by you (uid %d)", st.Uid, uid),
			Fix:    "use a state directory you own (--state DIR or OPEN_CONDUIT_STATE)",
		}
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return &UnsafeDirError{
			Path:   path,
			Reason: fmt.Sprintf("it is accessible to other users (mode %04o)", perm),
			Fix:    "run: chmod 700 " + path,
		}
	}
	return nil
}

// LockHeldError says that another process holds the state directory's lock.
type LockHeldError struct {
	Path string
	// PID is the holder's process id as it wrote it into the lock file; 0
	// when it could not be read.
	PID int
}

func (e *LockHeldError) Error() string {
	holder := "another process"
	if e.PID > 0 {
		holder = "process " + strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("the state directory is in use: %s holds the lock %s (is a daemon already running on it? stop it first)", holder, e.Path)
}

// Lock is the exclusive lock on a state directory. Whoever holds it owns
// the directory's sockets and the owner's token file.
type Lock struct {
	dir  string
	path string

	mu   sync.Mutex
	file *os.File
}

// AcquireLock checks that stateDir is safe and takes an exclusive,
// non-blocking flock on <stateDir>/daemon.lock, writing the caller's pid
// into it. If another process (or another Lock in this process) holds it,
// the error is a *LockHeldError naming the holder's pid.
func AcquireLock(stateDir string) (*Lock, error) {
	if err := CheckPrivateDir(stateDir); err != nil {
		return nil, err
	}
	path := filepath.Join(stateDir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cannot open lock file %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		pid := holderPID(f)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &LockHeldError{Path: path, PID: pid}
		}
		return nil, fmt.Errorf("cannot lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot write pid into lock file %s: %w", path, err)
	}
	return &Lock{dir: stateDir, path: path, file: f}, nil
}

// holderPID names the process that holds the lock on f: the pid it wrote
// into the file or, when it has taken the lock but not written its pid yet
// (or the file holds anything else), the holder the kernel records for
// the file's flock in /proc/locks. 0 when neither tells.
func holderPID(f *os.File) int {
	if pid := readPID(f); pid > 0 {
		return pid
	}
	return flockHolder(f, "/proc/locks")
}

// flockHolder finds the pid of the FLOCK held on f's inode in a
// /proc/locks listing (lines like
// "1: FLOCK  ADVISORY  WRITE 1234 fe:01:5678 0 EOF").
func flockHolder(f *os.File, locks string) int {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0
	}
	b, err := os.ReadFile(locks)
	if err != nil {
		return 0
	}
	id := fmt.Sprintf("%02x:%02x:%d", unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev)), st.Ino)
	for _, line := range strings.Split(string(b), "\n") {
		fs := strings.Fields(line)
		// A waiter's line has "->" after the number; a holder's does not.
		if len(fs) < 6 || fs[1] != "FLOCK" || fs[5] != id {
			continue
		}
		if pid, err := strconv.Atoi(fs[4]); err == nil && pid > 0 {
			return pid
		}
	}
	return 0
}

func readPID(f *os.File) int {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		return 0
	}
	return pid
}

// StateDir is the directory this lock guards.
func (l *Lock) StateDir() string { return l.dir }

// Held reports whether the lock is still held (Close was not called).
func (l *Lock) Held() bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.file != nil
}

// Close releases the lock. The lock file stays, so that the next holder
// finds it; its pid is rewritten on the next acquisition.
func (l *Lock) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file == nil {
		return nil
	}
	err := l.file.Close() // closing the descriptor releases the flock
	l.file = nil
	return err
}

// EnsurePrivateSubdir creates dir (0700) under a held lock and checks it.
func EnsurePrivateSubdir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("cannot create %s: %w", dir, err)
	}
	return CheckPrivateDir(dir)
}
