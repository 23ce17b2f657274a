package shell

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

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/executor"
)

// Name is the executor's name in bindings ("executor": "shell").
const Name = "shell"

// DefaultGrace is how long a command gets between SIGTERM and SIGKILL when
// its deadline passes, unless the executor is configured otherwise.
const DefaultGrace = 10 * time.Second

var (
	// ErrAlreadyStarted: Run was given an execution directory that already
	// holds a segment; that segment is Recovered, never run twice.
	ErrAlreadyStarted = errors.New("shell executor: the execution directory already holds a segment; recover it instead of running it again")
	// ErrResumeUnsupported: the shell executor has no resume capability.
	ErrResumeUnsupported = errors.New("shell executor: cannot resume a parked execution (it has no resume capability); run a new attempt instead")
)

// Options configure an Executor.
type Options struct {
	// Supervisor is the program whose `supervise <dir>` command is the
	// supervisor (Supervise): the daemon passes its own os.Executable().
	// Required.
	Supervisor string
	// LogLimit caps the log artifact in bytes; DefaultLogLimit when zero.
	LogLimit int64
	// Grace is the time between SIGTERM and SIGKILL when a deadline
	// passes; DefaultGrace when zero. Stop takes its own.
	Grace time.Duration
	// Clock tells the time deadlines are measured against (required: the
	// daemon's).
	Clock clock.Clock
	// After is the timer behind deadlines and grace periods; time.After
	// when nil. Tests pass one they fire themselves.
	After func(time.Duration) <-chan time.Time
}

// Executor is the shell executor. It is safe for concurrent use.
type Executor struct {
	opts Options

	mu sync.Mutex
	// children are the supervisors this Executor started and has not yet
	// reaped, by execution directory.
	children map[string]*child
}

type child struct {
	pid  int
	done chan struct{} // closed once the supervisor has exited and been reaped
}

var _ executor.Executor = (*Executor)(nil)

// New returns a shell executor.
func New(opts Options) (*Executor, error) {
	if opts.Supervisor == "" {
		return nil, errors.New("shell executor: no supervisor program given; pass the path of the open-conduit binary")
	}
	if opts.LogLimit <= 0 {
		opts.LogLimit = DefaultLogLimit
	}
	if opts.Grace <= 0 {
		opts.Grace = DefaultGrace
	}
	if opts.Clock == nil {
		return nil, errors.New("shell: the executor needs a Clock")
	}
	if opts.After == nil {
		opts.After = time.After
	}
	return &Executor{opts: opts, children: map[string]*child{}}, nil
}

// Info describes the shell executor: it reaches the toolbelt through the os
// CLI and cannot resume.
func (e *Executor) Info() executor.Info {
	return executor.Info{
		Name:         Name,
		Transport:    executor.TransportOS,
		Capabilities: []executor.Capability{executor.CapToolbelt},
	}
}

// Run starts the binding's command under a supervisor and waits until it
// ends, its deadline passes (the group is stopped and the result is failed),
// or ctx ends (ErrDetached; the command keeps running).
func (e *Executor) Run(ctx context.Context, req executor.RunRequest) (executor.Result, error) {
	cfg, err := ParseConfig(req.Config)
	if err != nil {
		return executor.Result{}, err
	}
	if req.Dir, err = executionDir(req.Dir); err != nil {
		return executor.Result{}, err
	}
	if err := os.MkdirAll(req.Dir, 0o700); err != nil {
		return executor.Result{}, fmt.Errorf("shell executor: cannot create the execution directory: %w", err)
	}
	for _, name := range []string{recordFile, statusFile, launchFile} {
		if _, err := os.Lstat(filepath.Join(req.Dir, name)); !errors.Is(err, os.ErrNotExist) {
			return executor.Result{}, ErrAlreadyStarted
		}
	}
	if !req.Deadline.IsZero() && !e.opts.Clock.Now().Before(req.Deadline) {
		return executor.Result{
			Outcome:  executor.Failed,
			ExitCode: -1,
			Message:  deadlineText(req.Deadline) + " passed before the command started",
		}, nil
	}
	env, err := environment(cfg, req)
	if err != nil {
		return executor.Result{}, err
	}
	cwd, err := workingDir(req.Dir, cfg.Dir)
	if err != nil {
		return executor.Result{}, err
	}
	l := launch{Argv: cfg.Command, Env: env, Dir: cwd, LogLimit: e.opts.LogLimit}
	if err := writeJSONFile(req.Dir, launchFile, l); err != nil {
		return executor.Result{}, fmt.Errorf("shell executor: cannot write the launch file: %w", err)
	}
	c, err := e.start(req.Dir)
	if err != nil {
		os.Remove(filepath.Join(req.Dir, launchFile))
		return executor.Result{}, err
	}
	return e.observe(ctx, req, &handle{pid: c.pid, done: c.done})
}

// Recover re-attaches to the segment of req.Dir: it reports the recorded
// status if the command already ended, waits for a supervisor that is still
// running (pid, start time and boot id must all match its record), and
// returns ErrGone if neither is there.
func (e *Executor) Recover(ctx context.Context, req executor.RunRequest) (executor.Result, error) {
	var err error
	if req.Dir, err = executionDir(req.Dir); err != nil {
		return executor.Result{}, err
	}
	if res, ended, err := outcome(req); ended || err != nil {
		return res, err
	}
	h, err := e.attach(req.Dir)
	if errors.Is(err, errNoProcess) {
		// The supervisor may have finished since we looked.
		if res, ended, err := outcome(req); ended || err != nil {
			return res, err
		}
		// A launch file left by a daemon that died before its supervisor
		// started holds secrets.
		os.Remove(filepath.Join(req.Dir, launchFile))
		return executor.Result{}, executor.ErrGone
	}
	if err != nil {
		return executor.Result{}, err
	}
	return e.observe(ctx, req, h)
}

// Resume is not supported: the shell executor has no resume capability.
func (e *Executor) Resume(context.Context, executor.RunRequest) (executor.Result, error) {
	return executor.Result{}, ErrResumeUnsupported
}

// Stop ends the segment's process group: SIGTERM to the group, SIGKILL to
// the command's processes after grace, and it returns once the supervisor has
// exited and no process of the group is left. A segment that already ended
// is left as it is.
func (e *Executor) Stop(ctx context.Context, req executor.RunRequest, grace time.Duration) error {
	dir, err := executionDir(req.Dir)
	if err != nil {
		return err
	}
	h, err := e.attach(dir)
	if errors.Is(err, errNoProcess) {
		return e.stopOrphans(ctx, dir)
	}
	if err != nil {
		return err
	}
	defer h.close()
	return e.stop(ctx, dir, h, grace, stopCancel)
}

// handle is a supervisor being watched.
type handle struct {
	pid  int // also the process group's id: the supervisor leads it
	done <-chan struct{}
	// release frees what watching took (a pidfd); nil for our own child.
	release func()
}

func (h *handle) close() {
	if h.release != nil {
		h.release()
	}
}

// start launches the supervisor of dir in a new session, with /dev/null and
// its own log as stdio, an empty environment and nothing on its command line
// but the directory.
func (e *Executor) start(dir string) (*child, error) {
	out, err := os.OpenFile(filepath.Join(dir, supervisorLogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("shell executor: cannot open the supervisor log: %w", err)
	}
	defer out.Close()
	cmd := exec.Command(e.opts.Supervisor, "supervise", dir)
	cmd.Env = []string{}
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("shell executor: cannot start the supervisor: %w", err)
	}
	c := &child{pid: cmd.Process.Pid, done: make(chan struct{})}
	e.mu.Lock()
	e.children[dir] = c
	e.mu.Unlock()
	go func() {
		cmd.Wait()
		e.mu.Lock()
		delete(e.children, dir)
		e.mu.Unlock()
		close(c.done)
	}()
	return c, nil
}

// attach finds the supervisor of dir: our own child, or the recorded process
// if it is still the one recorded. errNoProcess means none is running.
func (e *Executor) attach(dir string) (*handle, error) {
	e.mu.Lock()
	c := e.children[dir]
	e.mu.Unlock()
	if c != nil {
		return &handle{pid: c.pid, done: c.done}, nil
	}
	rec, ok, err := readRecord(dir)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errNoProcess
	}
	w, err := watchPID(rec.PID, rec.Start)
	if err != nil {
		return nil, err
	}
	return &handle{pid: rec.PID, done: w.Done(), release: w.Release}, nil
}

// readRecord reads the supervisor record of dir; a record of an earlier boot
// is as good as none.
func readRecord(dir string) (record, bool, error) {
	var rec record
	ok, err := readJSONFile(dir, recordFile, &rec)
	if !ok || err != nil {
		return rec, false, err
	}
	boot, err := bootID()
	if err != nil {
		return rec, false, err
	}
	return rec, rec.BootID == boot, nil
}

// observe waits for the supervisor of h to exit, stopping the group if the
// deadline passes first, and turns what it recorded into the result.
func (e *Executor) observe(ctx context.Context, req executor.RunRequest, h *handle) (executor.Result, error) {
	defer h.close()
	var deadline <-chan time.Time
	if !req.Deadline.IsZero() {
		deadline = e.opts.After(max(0, req.Deadline.Sub(e.opts.Clock.Now())))
	}
	select {
	case <-h.done:
	case <-ctx.Done():
		return executor.Result{}, executor.ErrDetached
	case <-deadline:
		if err := e.stop(ctx, req.Dir, h, e.opts.Grace, stopDeadline); err != nil {
			if ctx.Err() != nil {
				return executor.Result{}, executor.ErrDetached
			}
			return executor.Result{}, err
		}
	}
	res, _, err := outcome(req)
	return res, err
}

// stop ends the group h leads: SIGTERM to all of it (the supervisor ignores
// it), then after grace SIGKILL to everything but the supervisor, which then
// reaps the group and records how the command ended. Only a supervisor that
// outlives another grace is killed too.
func (e *Executor) stop(ctx context.Context, dir string, h *handle, grace time.Duration, reason string) error {
	pgid := h.pid
	select {
	case <-h.done: // it ended on its own: nothing to record
		return clearGroup(ctx, pgid)
	default:
	}
	if err := writeStop(dir, reason); err != nil {
		return fmt.Errorf("shell executor: cannot record the stop: %w", err)
	}
	unix.Kill(-pgid, unix.SIGTERM)
	exited, err := e.waitExit(ctx, h, grace)
	if err != nil {
		return err
	}
	if !exited {
		killMembers(pgid, unix.SIGKILL)
		if exited, err = e.waitExit(ctx, h, grace); err != nil {
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
	return clearGroup(ctx, pgid)
}

// waitExit waits up to d for the supervisor of h to exit.
func (e *Executor) waitExit(ctx context.Context, h *handle, d time.Duration) (bool, error) {
	select {
	case <-h.done:
		return true, nil
	case <-e.opts.After(d):
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// stopOrphans handles a Stop whose supervisor is not running: if its group
// still has live processes (the supervisor itself was killed), they are
// killed. A pid now held by another process means the group is long gone:
// its number could only be reused once nothing of it was left.
func (e *Executor) stopOrphans(ctx context.Context, dir string) error {
	rec, ok, err := readRecord(dir)
	if err != nil || !ok {
		return err
	}
	if _, err := readProcStat(rec.PID); !errors.Is(err, errNoProcess) {
		return nil
	}
	return clearGroup(ctx, rec.PID)
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

// clearGroup kills whatever is still alive in group pgid and waits, through
// pidfds, until each has exited.
func clearGroup(ctx context.Context, pgid int) error {
	for {
		members, err := groupMembers(pgid)
		if err != nil {
			return fmt.Errorf("shell executor: cannot list the processes of group %d: %w", pgid, err)
		}
		if len(members) == 0 {
			return nil
		}
		for _, pid := range members {
			st, err := readProcStat(pid)
			if err != nil {
				continue
			}
			w, err := watchPID(pid, st.Start)
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

// outcome turns what the supervisor and the executor recorded in req.Dir
// into the segment's result; ended is false if the supervisor recorded no
// status (yet).
func outcome(req executor.RunRequest) (res executor.Result, ended bool, err error) {
	var st status
	ok, err := readJSONFile(req.Dir, statusFile, &st)
	if err != nil {
		return executor.Result{}, false, err
	}
	res = executor.Result{Outcome: executor.Failed, ExitCode: -1}
	var what string
	switch {
	case !ok:
		what = "the supervisor ended without recording how the command ended"
	case st.StartError != "":
		what = st.StartError
	case st.Exited:
		res.ExitCode = st.ExitCode
		what = fmt.Sprintf("the command exited with status %d", st.ExitCode)
		if st.ExitCode == 0 {
			res.Outcome = executor.Succeeded
		}
	default:
		what = "the command was killed by " + st.Signal
	}
	switch readStop(req.Dir) {
	case stopDeadline:
		res.Outcome = executor.Failed
		res.Message = deadlineText(req.Deadline) + " passed and the command was stopped: " + what
	case stopCancel:
		res.Outcome = executor.Cancelled
		res.Message = "the command was stopped on request: " + what
	default:
		res.Message = what
	}
	if st.LogTruncated {
		res.Message += " (its log was cut at the log limit)"
	}
	if _, err := os.Stat(filepath.Join(req.Dir, logFile)); err == nil {
		res.Artifacts = []executor.Artifact{{
			Name:      "log",
			MediaType: "text/plain; charset=utf-8",
			Path:      filepath.Join(req.Dir, logFile),
		}}
	}
	return res, ok, nil
}

func deadlineText(deadline time.Time) string {
	if deadline.IsZero() {
		return "the attempt's deadline"
	}
	return "the attempt's deadline " + deadline.UTC().Format(time.RFC3339)
}

// executionDir makes dir absolute: the key children are kept by.
func executionDir(dir string) (string, error) {
	if dir == "" {
		return "", errors.New("shell executor: the run request names no execution directory")
	}
	return filepath.Abs(dir)
}

// workingDir resolves the binding's dir against the execution's work
// directory, creating the work directory (and a relative dir inside it).
func workingDir(execDir, dir string) (string, error) {
	work := filepath.Join(execDir, workDir)
	if filepath.IsAbs(dir) {
		return dir, nil
	}
	cwd := filepath.Join(work, dir)
	if err := os.MkdirAll(cwd, 0o700); err != nil {
		// errText, not err: the path holds the binding's configured dir.
		return "", fmt.Errorf("shell executor: cannot create the working directory inside the execution's work directory (%s); check the binding's dir", errText(err))
	}
	return cwd, nil
}
