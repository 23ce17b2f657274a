package shell

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/executor/proc"
	"github.com/open-conduit/open-conduit/internal/executor/sandbox"
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
	// Sandbox finds bwrap for bindings that ask for a sandbox; a Runtime
	// that looks bwrap up on PATH when nil.
	Sandbox *sandbox.Runtime
}

// DefaultLogLimit is how much of a command's output the log keeps unless
// the executor is configured otherwise.
const DefaultLogLimit = proc.DefaultLogLimit

// Files of the execution directory (see the package doc); the supervised
// files are proc's.
const workDir = "work"

// Why the executor stopped a group, kept in the stop file.
const (
	stopCancel   = "cancel"
	stopDeadline = "deadline"
)

// Executor is the shell executor. It is safe for concurrent use.
type Executor struct {
	opts Options
	sup  *proc.Supervisor
}

var (
	_ executor.Executor         = (*Executor)(nil)
	_ executor.Preflighter      = (*Executor)(nil)
	_ executor.EndpointOptional = (*Executor)(nil)
)

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
	if opts.Sandbox == nil {
		opts.Sandbox = &sandbox.Runtime{}
	}
	return &Executor{opts: opts, sup: &proc.Supervisor{Program: opts.Supervisor, After: opts.After}}, nil
}

// Supervise is the supervisor of one execution directory (proc.Supervise),
// run as `open-conduit supervise <dir>`.
func Supervise(dir string) error { return proc.Supervise(dir) }

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
	if proc.Started(req.Dir) {
		return executor.Result{}, ErrAlreadyStarted
	}
	if !req.Deadline.IsZero() && !e.opts.Clock.Now().Before(req.Deadline) {
		return executor.Result{
			Outcome:  executor.Failed,
			ExitCode: -1,
			Message:  deadlineText(req.Deadline) + " passed before the command started",
		}, nil
	}
	cwd, err := workingDir(req.Dir, cfg.Dir)
	if err != nil {
		return executor.Result{}, err
	}
	l := proc.Launch{Argv: cfg.Command, Dir: cwd, LogLimit: e.opts.LogLimit}
	if cfg.Sandbox.Enabled {
		if l, req, err = e.sandboxed(cfg, req, l); err != nil {
			return executor.Result{}, err
		}
	}
	if l.Env, err = environment(cfg, req); err != nil {
		return executor.Result{}, err
	}
	if cfg.Sandbox.Enabled {
		l.Env = sandboxEnv(l.Env)
	}
	h, err := e.sup.Start(req.Dir, l)
	if errors.Is(err, proc.ErrAlreadyStarted) {
		return executor.Result{}, ErrAlreadyStarted
	}
	if err != nil {
		return executor.Result{}, fmt.Errorf("shell executor: %w", err)
	}
	return e.observe(ctx, req, h)
}

// Preflight says, before anything is launched, that a binding asking for
// a sandbox cannot run on this machine (an *executor.UnavailableError).
func (e *Executor) Preflight(config json.RawMessage) error {
	cfg, err := ParseConfig(config)
	if err != nil || !cfg.Sandbox.Enabled {
		return nil
	}
	_, err = e.opts.Sandbox.Check()
	return err
}

// NeedsEndpoint says whether a binding that grants no operation still
// needs its execution's endpoint: only a sandboxed command does, whose
// egress proxy is reached through the run directory. An unsandboxed
// command then runs without OS_ENDPOINT and OS_TOKEN_FILE, and the host
// makes no run directory, token file or socket for it. A config that does
// not parse keeps the endpoint (Run refuses it anyway).
func (e *Executor) NeedsEndpoint(config json.RawMessage) bool {
	cfg, err := ParseConfig(config)
	return err != nil || cfg.Sandbox.Enabled
}

// sandboxed turns the launch of cfg into bwrap's: the work directory (or
// the absolute dir) writable, and req's execution context as the command
// sees it inside.
func (e *Executor) sandboxed(cfg Config, req executor.RunRequest, l proc.Launch) (proc.Launch, executor.RunRequest, error) {
	prog, err := e.opts.Sandbox.Check()
	if err != nil {
		return l, req, err
	}
	if req.Context.ToolbeltDir == "" {
		return l, req, errors.New("shell executor: a sandboxed command needs the host's os binary, and the run request names no toolbelt directory")
	}
	writable := filepath.Join(req.Dir, workDir)
	if filepath.IsAbs(cfg.Dir) {
		writable = cfg.Dir
	}
	argv, in, err := sandbox.Wrap(sandbox.Spec{
		Program: prog, OS: filepath.Join(req.Context.ToolbeltDir, "os"),
		Endpoint: req.Context.ToolbeltEndpoint, TokenFile: req.Context.ToolbeltTokenFile,
		Playbooks: req.Context.PlaybookDir, ReadOnly: cfg.Sandbox.ReadOnly, Writable: []string{writable}, Dir: l.Dir, Argv: l.Argv,
	})
	if err != nil {
		return l, req, fmt.Errorf("shell executor: %w", err)
	}
	l.Argv, l.IgnoreStopSignals = argv, true
	req.Context.ToolbeltDir, req.Context.PlaybookDir = in.BinDir, in.PlaybookDir
	req.Context.ToolbeltEndpoint, req.Context.ToolbeltTokenFile = in.Endpoint, in.TokenFile
	return l, req, nil
}

// sandboxEnv adds the proxy variables to a sandboxed command's
// environment, and gives it the sandbox's private /tmp as HOME (the
// daemon's is not mounted).
func sandboxEnv(env []string) []string {
	set := sandbox.ProxyEnv()
	set["HOME"] = "/tmp"
	return sandbox.WithEnv(env, set)
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
	h, err := e.sup.Attach(req.Dir)
	if errors.Is(err, proc.ErrNoProcess) {
		// The supervisor may have finished since we looked.
		if res, ended, err := outcome(req); ended || err != nil {
			return res, err
		}
		// A launch file left by a daemon that died before its supervisor
		// started holds secrets.
		os.Remove(filepath.Join(req.Dir, proc.LaunchFile))
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
	if err := e.sup.StopDir(ctx, dir, grace, stopCancel); err != nil {
		return fmt.Errorf("shell executor: %w", err)
	}
	return nil
}

// observe waits for the supervisor of h to exit, stopping the group if the
// deadline passes first, and turns what it recorded into the result.
func (e *Executor) observe(ctx context.Context, req executor.RunRequest, h *proc.Handle) (executor.Result, error) {
	defer h.Close()
	var deadline <-chan time.Time
	if !req.Deadline.IsZero() {
		deadline = e.opts.After(max(0, req.Deadline.Sub(e.opts.Clock.Now())))
	}
	select {
	case <-h.Done():
	case <-ctx.Done():
		return executor.Result{}, executor.ErrDetached
	case <-deadline:
		if err := e.sup.Stop(ctx, req.Dir, h, e.opts.Grace, stopDeadline); err != nil {
			if ctx.Err() != nil {
				return executor.Result{}, executor.ErrDetached
			}
			return executor.Result{}, fmt.Errorf("shell executor: %w", err)
		}
	}
	res, _, err := outcome(req)
	return res, err
}

// outcome turns what the supervisor and the executor recorded in req.Dir
// into the segment's result; ended is false if the supervisor recorded no
// status (yet).
func outcome(req executor.RunRequest) (res executor.Result, ended bool, err error) {
	st, ok, err := proc.ReadStatus(req.Dir)
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
	switch proc.ReadStop(req.Dir) {
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
	if _, err := os.Stat(filepath.Join(req.Dir, proc.LogFile)); err == nil {
		res.Artifacts = []executor.Artifact{{
			Name:      "log",
			MediaType: "text/plain; charset=utf-8",
			Path:      filepath.Join(req.Dir, proc.LogFile),
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
		return "", fmt.Errorf("shell executor: cannot create the working directory inside the execution's work directory (%s); check the binding's dir", proc.ErrText(err))
	}
	return cwd, nil
}
