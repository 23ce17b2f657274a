// Package reaper runs a command as a child subreaper and, when the command
// ends (or the reaper is told to stop), kills and reaps every process the
// command left behind, including those that left its process group or
// session (setsid), which become the reaper's children.
//
// It is the body of the hidden `open-conduit reap` command, under which the
// configuration's cmd: secrets run, so that nothing a secret command starts
// outlives its resolution. The executors' supervisor shares its parts
// (BecomeSubreaper, Children, Descendants) to find what its command left.
// It must never be used by the daemon's own process: the daemon is not a
// subreaper, since the shell executor's supervisors are meant to outlive
// it.
package reaper

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

// Run runs argv with the reaper's standard streams and environment, in a
// process group of its own, and returns its exit status (128+signal when a
// signal ended it). When it ends, or when the reaper receives SIGTERM or
// SIGINT (then its group is killed first), every process left behind is
// killed and reaped before Run returns.
func Run(argv []string) (int, error) {
	if len(argv) == 0 {
		return 2, errors.New("reap: name the command to run")
	}
	if err := BecomeSubreaper(); err != nil {
		return 1, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(stop)
	if err := cmd.Start(); err != nil {
		return 127, err
	}
	pgid := cmd.Process.Pid
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-stop:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		err = <-done
	}
	// The command's group and everything reparented here go.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	reapAll()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	return 1, err
}

// reapAll kills every child of this process and reaps it, until none is
// left: killing one orphans its own children, which become ours in turn.
func reapAll() {
	self := os.Getpid()
	for {
		kids := Children(self)
		for _, pid := range kids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		reaped := false
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if err != nil || pid <= 0 {
				break
			}
			reaped = true
		}
		if len(kids) == 0 && !reaped {
			var ws syscall.WaitStatus
			if _, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); errors.Is(err, syscall.ECHILD) {
				return
			}
		}
		if len(kids) > 0 && !reaped {
			// Killed but not yet exited: wait for one of them.
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(-1, &ws, 0, nil)
		}
	}
}

// Children lists the live children of process pid (zombies included)
// from /proc/<pid>/task/<tid>/children, a few small files, not the whole
// process table. On a kernel built without those files it falls back to
// scanning /proc for processes whose parent is pid.
func Children(pid int) []int {
	base := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(base)
	if err != nil {
		return nil
	}
	var out []int
	for _, task := range tasks {
		b, err := os.ReadFile(base + "/" + task.Name() + "/children")
		if errors.Is(err, os.ErrNotExist) {
			if _, serr := os.Stat(base + "/" + task.Name()); serr == nil {
				return scanChildren(pid) // no children files in this kernel
			}
			continue // the thread ended meanwhile
		}
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if child, err := strconv.Atoi(f); err == nil {
				out = append(out, child)
			}
		}
	}
	return out
}

// Descendants lists the live descendants of pid, children first, by
// following Children down the tree. A process that forks or exits
// meanwhile may be missed or listed though gone: callers loop until what
// they wait for says nothing is left.
func Descendants(pid int) []int {
	var out []int
	seen := map[int]bool{pid: true}
	for next := []int{pid}; len(next) > 0; {
		var level []int
		for _, p := range next {
			for _, c := range Children(p) {
				if !seen[c] {
					seen[c] = true
					level = append(level, c)
				}
			}
		}
		out = append(out, level...)
		next = level
	}
	return out
}

// scanChildren lists the processes whose parent is pid, from all of /proc.
func scanChildren(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil && ppid == pid {
			out = append(out, child)
		}
	}
	return out
}
