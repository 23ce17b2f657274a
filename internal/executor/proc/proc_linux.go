package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/open-conduit/open-conduit/internal/reaper"
)

// ProcStat is what the executor reads of /proc/<pid>/stat.
type ProcStat struct {
	State   byte // R, S, D, Z, ...
	PGID    int
	Session int
	// Start is field 22, the start time in clock ticks since boot: with the
	// boot id it tells a process apart from a later one that reused its pid.
	Start uint64
}

// ErrNoProcess: no process has that pid.
var ErrNoProcess = errors.New("no such process")

func ReadProcStat(pid int) (ProcStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH) {
		return ProcStat{}, ErrNoProcess
	}
	if err != nil {
		return ProcStat{}, err
	}
	return parseProcStat(b)
}

// parseProcStat parses "pid (comm) state ppid pgrp session ...". The command
// name may hold spaces and parentheses, so fields are counted from the last
// ')'.
func parseProcStat(b []byte) (ProcStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ProcStat{}, errors.New("malformed /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 20 || len(f[0]) != 1 {
		return ProcStat{}, errors.New("malformed /proc stat")
	}
	pgid, err1 := strconv.Atoi(f[5-3])
	sid, err2 := strconv.Atoi(f[6-3])
	start, err3 := strconv.ParseUint(f[22-3], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return ProcStat{}, fmt.Errorf("malformed /proc stat: %w", err)
	}
	return ProcStat{State: f[0][0], PGID: pgid, Session: sid, Start: start}, nil
}

// BootID identifies the running kernel boot, so that a record written before
// a reboot never matches a process after it.
func BootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// groupMembers lists the live (not yet exited) processes of process group
// pgid in session pgid, the shape of a group the supervisor leads.
func groupMembers(pgid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := ReadProcStat(pid)
		if err != nil {
			continue // gone meanwhile
		}
		if st.PGID == pgid && st.Session == pgid && st.State != 'Z' && st.State != 'X' {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// signalMember sends sig to pid only if it still belongs to group pgid. The
// pidfd pins the process the pid named when it was opened, so the check and
// the signal concern the same process even if the pid is reused meanwhile.
func signalMember(pid, pgid int, sig unix.Signal) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil // gone
	}
	defer unix.Close(fd)
	st, err := ReadProcStat(pid)
	if err != nil || st.PGID != pgid || st.Session != pgid {
		return nil
	}
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return err
	}
	return nil
}

// PIDWatch reports when a process exits, whether or not it is our child,
// through a pidfd in the runtime's poller: no thread blocks and no timer
// polls.
type PIDWatch struct {
	f    *os.File
	done chan struct{}
}

// WatchPID starts watching pid, provided it is still the process that was
// started at start ticks. ErrNoProcess means there is no such process (any
// more).
func WatchPID(pid int, start uint64) (*PIDWatch, error) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.ESRCH) {
		return nil, ErrNoProcess
	}
	if err != nil {
		return nil, fmt.Errorf("cannot watch process %d: %w", pid, err)
	}
	// Read the start time after opening the pidfd: if it matches, the pidfd
	// names the recorded process.
	st, err := ReadProcStat(pid)
	if err != nil || st.Start != start {
		unix.Close(fd)
		return nil, ErrNoProcess
	}
	return watchPidfd(pid, fd, nil)
}

// watchChild calls exited, on a goroutine parked in the runtime's poller
// until then, once pid has exited. pid is a child of this process that has
// not been reaped yet, so it cannot name another process meanwhile: no
// start time is needed to pin it.
func watchChild(pid int, exited func()) error {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("cannot watch process %d: %w", pid, err)
	}
	_, err = watchPidfd(pid, fd, exited)
	return err
}

// watchPidfd parks a goroutine in the runtime's poller until the process
// of the pidfd fd has exited; it owns fd from here on. With exited, the
// goroutine closes the pidfd and calls it before Done is closed, and the
// watch must not be Released.
func watchPidfd(pid, fd int, exited func()) (*PIDWatch, error) {
	f := os.NewFile(uintptr(fd), "pidfd")
	// Setting no deadline fails unless the runtime's poller took the file;
	// without it the wait below would end at once.
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot watch process %d: its pidfd cannot be polled: %w", pid, err)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	w := &PIDWatch{f: f, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		// A pidfd polls readable once its process has exited. Returning
		// false parks the goroutine in the poller until it is; closing the
		// file ends the wait.
		_ = rc.Read(func(fd uintptr) bool {
			for {
				fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
				n, err := unix.Poll(fds, 0)
				if errors.Is(err, unix.EINTR) {
					continue
				}
				return err != nil || n > 0
			}
		})
		if exited != nil {
			f.Close()
			exited()
		}
	}()
	return w, nil
}

// Done is closed when the process has exited (or the watch was released).
func (w *PIDWatch) Done() <-chan struct{} { return w.done }

// Release stops watching and waits for the watching goroutine to end.
func (w *PIDWatch) Release() {
	w.f.Close()
	<-w.done
}

// setSubreaper makes the calling process the reaper of its orphaned
// descendants, so that the supervisor reaps every process of its group, not
// only its direct child.
func setSubreaper() error { return reaper.BecomeSubreaper() }
