package proc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/open-conduit/open-conduit/internal/reaper"
)

// drainBound is how long the supervisor keeps reading output after the whole
// group has been reaped: only a process that left the group (setsid) can
// still hold the pipe open then, and it is not waited for.
const drainBound = 2 * time.Second

// Supervise is the supervisor of one execution directory, run by the
// executor as `open-conduit supervise <dir>` in a session and process group
// of its own. It reads and deletes the launch file, starts the command as its
// child in the supervisor's own process group, copies the command's stdout and stderr
// (one pipe, so in arrival order) into the bounded log, waits for it, kills
// whatever the command left running in the group and reaps it, and writes
// the command's exit status to the status file before it returns.
//
// It ignores SIGTERM, SIGINT and SIGHUP: the executor's polite stop signals
// the whole group, and the supervisor must outlive its command to record
// how it ended. Its only error is failing to record a status at all.
func Supervise(dir string) error {
	// First of all, so that a stop racing the start cannot kill the
	// supervisor before it can record anything.
	stopped := make(chan os.Signal, 1)
	signal.Notify(stopped, unix.SIGTERM, unix.SIGINT, unix.SIGHUP)

	// The supervisor later moves into the command's working directory.
	abs, err := filepath.Abs(dir)
	if err != nil {
		// The launch file holds secrets: it goes even when nothing runs.
		os.Remove(filepath.Join(dir, LaunchFile))
		return err
	}
	dir = abs
	if err := writeRecord(dir, os.Getpid()); err != nil {
		os.Remove(filepath.Join(dir, LaunchFile))
		return fmt.Errorf("cannot record the supervisor in the execution directory: %w", err)
	}

	var l Launch
	ok, err := ReadJSONFile(dir, LaunchFile, &l)
	// The launch file holds secrets: it goes whatever happened.
	os.Remove(filepath.Join(dir, LaunchFile))
	var st Status
	switch {
	case err != nil || !ok || len(l.Argv) == 0:
		st = Status{ExitCode: -1, StartError: "the launch file was missing or damaged"}
	default:
		st = superviseCommand(dir, l, stopped)
	}
	if err := writeStateFile(dir, StatusFile, st); err != nil {
		return fmt.Errorf("cannot record the exit status: %w", err)
	}
	return nil
}

func superviseCommand(dir string, l Launch, stopped chan os.Signal) Status {
	if l.LogLimit <= 0 {
		l.LogLimit = DefaultLogLimit
	}
	f, err := os.OpenFile(filepath.Join(dir, LogFile), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return Status{ExitCode: -1, StartError: "cannot open the log file: " + errText(err)}
	}
	defer f.Close()
	log := &cappedLog{w: f, limit: l.LogLimit}
	fail := func(msg string) Status {
		fmt.Fprintf(log, "open-conduit: %s\n", msg)
		return Status{ExitCode: -1, StartError: msg}
	}

	// Stop raced Run: the group was signalled before there was a command.
	select {
	case <-stopped:
		return fail("the command was stopped before it started")
	default:
	}

	// Orphans of the command's children are reparented to the supervisor,
	// so it can reap every process of the group, not only its child.
	if err := setSubreaper(); err != nil {
		return fail("cannot become the reaper of the command's processes: " + errText(err))
	}
	// The supervisor moves into the working directory and takes the
	// command's PATH, so the program is found exactly as the command's own
	// shell would find it.
	if err := os.Chdir(l.Dir); err != nil {
		return fail("cannot enter the working directory: " + errText(err))
	}
	os.Setenv("PATH", lookupEnv(l.Env, "PATH"))
	path, err := exec.LookPath(l.Argv[0])
	if errors.Is(err, exec.ErrDot) {
		err = nil
	}
	if err != nil {
		return fail("cannot start the command: " + errText(err))
	}

	r, w, err := os.Pipe()
	if err != nil {
		return fail("cannot create the output pipe: " + errText(err))
	}
	defer r.Close()
	// With a stream, stdout goes to a pipe of its own, copied into the
	// stream file; stderr alone goes to the log.
	var stream *cappedLog
	var sr, sw *os.File
	if l.Stream != "" {
		if l.StreamLimit <= 0 {
			l.StreamLimit = DefaultStreamLimit
		}
		if filepath.Base(l.Stream) != l.Stream || l.Stream == "." || l.Stream == ".." {
			w.Close()
			return fail("the stream file is not a plain file name")
		}
		sf, err := os.OpenFile(filepath.Join(dir, l.Stream), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			w.Close()
			return fail("cannot open the stream file: " + errText(err))
		}
		defer sf.Close()
		stream = &cappedLog{w: sf, limit: l.StreamLimit, quiet: true}
		if sr, sw, err = os.Pipe(); err != nil {
			w.Close()
			return fail("cannot create the stream pipe: " + errText(err))
		}
		defer sr.Close()
	}
	in := os.DevNull
	if l.Stdin != "" {
		if filepath.Base(l.Stdin) != l.Stdin || l.Stdin == "." || l.Stdin == ".." {
			w.Close()
			if sw != nil {
				sw.Close()
			}
			return fail("the stdin file is not a plain file name")
		}
		in = filepath.Join(dir, l.Stdin)
	}
	null, err := os.Open(in)
	if err != nil {
		w.Close()
		if sw != nil {
			sw.Close()
		}
		if l.Stdin != "" {
			return fail("cannot open the stdin file: " + errText(err))
		}
		return fail("cannot open " + os.DevNull + ": " + errText(err))
	}
	out := w
	if sw != nil {
		out = sw
	}
	if l.IgnoreStopSignals {
		// An ignored signal stays ignored across exec; the supervisor
		// listens again at once after.
		signal.Ignore(unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
	}
	pid, err := syscall.ForkExec(path, l.Argv, &syscall.ProcAttr{
		Env:   l.Env,
		Files: []uintptr{null.Fd(), out.Fd(), w.Fd()},
	})
	if l.IgnoreStopSignals {
		signal.Notify(stopped, unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
	}
	w.Close()
	if sw != nil {
		sw.Close()
	}
	null.Close()
	if err != nil {
		return fail("cannot start the command: " + errText(err))
	}

	copied := make(chan struct{})
	go func() {
		io.Copy(log, r)
		close(copied)
	}()
	streamed := make(chan struct{})
	if sr != nil {
		go func() {
			io.Copy(stream, sr)
			close(streamed)
		}()
	} else {
		close(streamed)
	}
	ws, err := reapCommand(pid)
	endGroup(os.Getpid())
	r.SetReadDeadline(time.Now().Add(drainBound))
	if sr != nil {
		sr.SetReadDeadline(time.Now().Add(drainBound))
	}
	<-copied
	<-streamed

	var st Status
	switch {
	case err != nil:
		st = Status{ExitCode: -1, StartError: "lost track of the command: " + errText(err)}
	case ws.Exited():
		st = Status{Exited: true, ExitCode: ws.ExitStatus()}
	case ws.Signaled():
		st = Status{ExitCode: -1, Signal: signalName(ws.Signal())}
	default:
		st = Status{ExitCode: -1, StartError: "lost track of the command"}
	}
	st.LogTruncated = log.truncated
	if stream != nil {
		st.StreamTruncated = stream.truncated
		if stream.err != nil {
			fmt.Fprintf(os.Stderr, "writing the stream failed: %v\n", stream.err)
		}
	}
	if log.err != nil {
		fmt.Fprintf(os.Stderr, "writing the log failed: %v\n", log.err)
	}
	return st
}

// reapCommand reaps children until the command itself has exited, and
// returns its wait status. Other children are orphans of the command's own
// children, reaped as they go.
func reapCommand(pid int) (syscall.WaitStatus, error) {
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return ws, err
		}
		if got == pid {
			return ws, nil
		}
	}
}

// endGroup kills every process left in the supervisor's group (the
// supervisor leads it, so pgid is its own pid) and reaps them, until no
// child of the supervisor is left in it. A process that left the group is
// not its business.
//
// As the group's subreaper the supervisor is an ancestor of every process
// of its group, so when it has no child at all (wait4 says ECHILD, the
// usual end of a command that left nothing running) the group holds
// nothing but itself, and nothing is read from /proc. Otherwise the
// members are found among its descendants
// (/proc/<pid>/task/<tid>/children), never by scanning every process of
// the machine.
func endGroup(pgid int) {
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) || got > 0 {
			continue // reaped one (in the group or not): look again
		}
		if err != nil { // ECHILD: no descendant is left
			return
		}
		for _, pid := range reaper.Descendants(pgid) {
			signalMember(pid, pgid, unix.SIGKILL)
		}
		_, err = syscall.Wait4(-pgid, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil { // ECHILD: none left in the group
			return
		}
	}
}

func lookupEnv(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if len(env[i]) > len(name) && env[i][len(name)] == '=' && env[i][:len(name)] == name {
			return env[i][len(name)+1:]
		}
	}
	return ""
}

// errText is a safe description of err: its errno, or a fixed phrase, never
// a path or name from the config.
func errText(err error) string {
	var errno syscall.Errno
	switch {
	case errors.Is(err, exec.ErrNotFound):
		return "the program was not found on PATH"
	case errors.As(err, &errno):
		return errno.Error()
	default:
		return "unexpected error"
	}
}

func signalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return name
	}
	return "signal " + strconv.Itoa(int(sig))
}
