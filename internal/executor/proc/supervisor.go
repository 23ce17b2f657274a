package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrAlreadyStarted: Start was given a directory that already holds a
// segment; that segment is to be attached to, never run twice.
var ErrAlreadyStarted = errors.New("the directory already holds a supervised segment; recover it instead of running it again")

// Supervisor starts supervisors (`<Program> supervise <dir>`) and watches,
// attaches to and stops them. It is safe for concurrent use.
type Supervisor struct {
	// Program is the program whose `supervise <dir>` command runs Supervise
	// (the daemon's own executable).
	Program string
	// After is the timer behind grace periods; time.After when nil.
	After func(time.Duration) <-chan time.Time

	mu sync.Mutex
	// children are the supervisors this one started and has not yet
	// reaped, by directory.
	children map[string]*child
}

type child struct {
	pid  int
	done chan struct{} // closed once the supervisor has exited and been reaped
}

// Handle is a supervisor being watched.
type Handle struct {
	// PID is the supervisor's pid, also its process group's id: it leads
	// the group.
	PID  int
	done <-chan struct{}
	// release frees what watching took (a pidfd); nil for our own child.
	release func()
}

// Done is closed once the supervisor has exited.
func (h *Handle) Done() <-chan struct{} { return h.done }

// Close frees what watching took; the supervisor is not affected.
func (h *Handle) Close() {
	if h.release != nil {
		h.release()
	}
}

func (s *Supervisor) after(d time.Duration) <-chan time.Time {
	if s.After == nil {
		return time.After(d)
	}
	return s.After(d)
}

// Started reports whether dir already holds a segment (its record, status
// or launch file).
func Started(dir string) bool {
	for _, name := range []string{RecordFile, StatusFile, LaunchFile} {
		if _, err := os.Lstat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			return true
		}
	}
	return false
}

// Start writes the launch file of dir (0600: it holds the command's
// environment) and starts its supervisor in a new session, with /dev/null
// and its own log as stdio, an empty environment and nothing on its command
// line but the directory. A directory that already holds a segment is
// ErrAlreadyStarted. The directory must exist and be absolute.
func (s *Supervisor) Start(dir string, l Launch) (*Handle, error) {
	if Started(dir) {
		return nil, ErrAlreadyStarted
	}
	if err := writeStateFile(dir, LaunchFile, l); err != nil {
		return nil, fmt.Errorf("cannot write the launch file: %w", err)
	}
	c, err := s.start(dir)
	if err != nil {
		os.Remove(filepath.Join(dir, LaunchFile))
		return nil, err
	}
	return &Handle{PID: c.pid, done: c.done}, nil
}

func (s *Supervisor) start(dir string) (*child, error) {
	out, err := os.OpenFile(filepath.Join(dir, SupervisorLogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cannot open the supervisor log: %w", err)
	}
	defer out.Close()
	cmd := exec.Command(s.Program, "supervise", dir)
	cmd.Env = []string{}
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cannot start the supervisor: %w", err)
	}
	c := &child{pid: cmd.Process.Pid, done: make(chan struct{})}
	s.mu.Lock()
	if s.children == nil {
		s.children = map[string]*child{}
	}
	s.children[dir] = c
	s.mu.Unlock()
	// The supervisor is waited for through a pidfd in the runtime's
	// poller, so a live execution holds a parked goroutine and no thread;
	// cmd.Wait then only reaps it, at once. Without pidfds the goroutine
	// blocks in the wait, holding a thread.
	reap := func() {
		cmd.Wait()
		s.mu.Lock()
		delete(s.children, dir)
		s.mu.Unlock()
		close(c.done)
	}
	if err := watchChild(c.pid, reap); err != nil {
		go reap()
	}
	return c, nil
}

// Reaped returns a channel closed once the supervisor this Supervisor
// started for dir has been reaped; nil when it started none that is not yet
// reaped.
func (s *Supervisor) Reaped(dir string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.children[dir]; c != nil {
		return c.done
	}
	return nil
}

// Attach finds the supervisor of dir: our own child, or the recorded
// process if it is still the one recorded (pid, start time and boot id).
// ErrNoProcess means none is running.
func (s *Supervisor) Attach(dir string) (*Handle, error) {
	s.mu.Lock()
	c := s.children[dir]
	s.mu.Unlock()
	if c != nil {
		return &Handle{PID: c.pid, done: c.done}, nil
	}
	rec, ok, err := ReadRecord(dir)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrNoProcess
	}
	w, err := WatchPID(rec.PID, rec.Start)
	if err != nil {
		return nil, err
	}
	return &Handle{PID: rec.PID, done: w.Done(), release: w.Release}, nil
}

// ReadRecord reads the supervisor record of dir; a record of an earlier
// boot is as good as none.
func ReadRecord(dir string) (Record, bool, error) {
	var rec Record
	ok, err := ReadJSONFile(dir, RecordFile, &rec)
	if !ok || err != nil {
		return rec, false, err
	}
	boot, err := BootID()
	if err != nil {
		return rec, false, err
	}
	return rec, rec.BootID == boot, nil
}

// Stop ends the group h leads: it records reason in dir's stop file (the
// first reason stands), sends SIGTERM to all of the group (the supervisor
// ignores it), then after grace SIGKILL to everything but the supervisor,
// which then reaps the group and records how the command ended. Only a
// supervisor that outlives another grace is killed too. A supervisor that
// already ended is left as it is, and nothing is recorded.
func (s *Supervisor) Stop(ctx context.Context, dir string, h *Handle, grace time.Duration, reason string) error {
	pgid := h.PID
	select {
	case <-h.done: // it ended on its own: nothing to record
		return ClearGroup(ctx, pgid)
	default:
	}
	if err := WriteStop(dir, reason); err != nil {
		return fmt.Errorf("cannot record the stop: %w", err)
	}
	unix.Kill(-pgid, unix.SIGTERM)
	exited, err := s.waitExit(ctx, h, grace)
	if err != nil {
		return err
	}
	if !exited {
		killMembers(pgid, unix.SIGKILL)
		if exited, err = s.waitExit(ctx, h, grace); err != nil {
			return err
		}
	}
	if !exited {
		unix.Kill(-pgid, unix.SIGKILL)
		select {
		case <-h.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return ClearGroup(ctx, pgid)
}

// StopDir stops the segment of dir wherever it is: an attached supervisor
// as Stop does, or, when no supervisor runs, whatever is left alive of its
// group (StopOrphans).
func (s *Supervisor) StopDir(ctx context.Context, dir string, grace time.Duration, reason string) error {
	h, err := s.Attach(dir)
	if errors.Is(err, ErrNoProcess) {
		return StopOrphans(ctx, dir)
	}
	if err != nil {
		return err
	}
	defer h.Close()
	return s.Stop(ctx, dir, h, grace, reason)
}

// waitExit waits up to d for the supervisor of h to exit.
func (s *Supervisor) waitExit(ctx context.Context, h *Handle, d time.Duration) (bool, error) {
	select {
	case <-h.done:
		return true, nil
	case <-s.after(d):
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// StopOrphans handles a stop whose supervisor is not running: if its group
// still has live processes (the supervisor itself was killed), they are
// killed. A pid now held by another process means the group is long gone:
// its number could only be reused once nothing of it was left.
func StopOrphans(ctx context.Context, dir string) error {
	rec, ok, err := ReadRecord(dir)
	if err != nil || !ok {
		return err
	}
	if _, err := ReadProcStat(rec.PID); !errors.Is(err, ErrNoProcess) {
		return nil
	}
	return ClearGroup(ctx, rec.PID)
}

// killMembers sends sig to every live process of group pgid but its leader.
func killMembers(pgid int, sig unix.Signal) {
	members, _ := groupMembers(pgid)
	for _, pid := range members {
		if pid != pgid {
			signalMember(pid, pgid, sig)
		}
	}
}

// ClearGroup kills whatever is still alive in group pgid and waits, through
// pidfds, until each has exited. A group with no process at all, not even
// a zombie (kill(-pgid, 0) says ESRCH: the usual case once the supervisor
// has been reaped), is clear without a look at /proc.
func ClearGroup(ctx context.Context, pgid int) error {
	for {
		if err := unix.Kill(-pgid, 0); errors.Is(err, unix.ESRCH) {
			return nil
		}
		members, err := groupMembers(pgid)
		if err != nil {
			return fmt.Errorf("cannot list the processes of group %d: %w", pgid, err)
		}
		if len(members) == 0 {
			return nil
		}
		for _, pid := range members {
			st, err := ReadProcStat(pid)
			if err != nil {
				continue
			}
			w, err := WatchPID(pid, st.Start)
			if err != nil {
				continue
			}
			signalMember(pid, pgid, unix.SIGKILL)
			select {
			case <-w.Done():
				w.Release()
			case <-ctx.Done():
				w.Release()
				return ctx.Err()
			}
		}
	}
}

// ReadStatus reads how the supervisor of dir recorded the command ended; ok
// is false when it recorded nothing (yet).
func ReadStatus(dir string) (st Status, ok bool, err error) {
	ok, err = ReadJSONFile(dir, StatusFile, &st)
	return st, ok, err
}

// ErrText is a safe description of err: its errno, or a fixed phrase,
// never a path or a name from a configuration.
func ErrText(err error) string { return errText(err) }
