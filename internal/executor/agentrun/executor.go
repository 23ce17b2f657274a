package agentrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/executor/agent"
	"github.com/open-conduit/open-conduit/internal/executor/proc"
	"github.com/open-conduit/open-conduit/internal/executor/sandbox"
)

// Defaults of Options.
const (
	// DefaultGrace is the time between SIGTERM and SIGKILL when the agent
	// is stopped by its deadline or after parking.
	DefaultGrace = 10 * time.Second
	// DefaultParkGrace is how long the agent has to end its turn by
	// itself once a wait or declare_outcome succeeded.
	DefaultParkGrace = 30 * time.Second
	// DefaultLogLimit caps the log (stderr); DefaultStreamLimit the
	// transcript.
	DefaultLogLimit    = proc.DefaultLogLimit
	DefaultStreamLimit = proc.DefaultStreamLimit
)

// Files and directories of an execution directory (see the package doc).
const (
	homeDir     = "home"
	workDir     = "work"
	segmentsDir = "segments"
	streamFile  = "stream.jsonl"
	promptFile  = "prompt.txt"
	segmentFile = "segment.json"
)

// Why the runner stopped a group, kept in the segment's stop file.
const (
	stopCancel   = "cancel"
	stopDeadline = "deadline"
	stopParked   = "parked"
)

// Options configure an Executor.
type Options struct {
	// Supervisor is the program whose `supervise <dir>` command runs
	// proc.Supervise (the daemon's own executable). Required.
	Supervisor string
	// Clock tells the time deadlines are measured against. Required.
	Clock clock.Clock
	// After is the timer behind deadlines and graces; time.After when nil.
	After func(time.Duration) <-chan time.Time
	// Grace is the time between SIGTERM and SIGKILL (DefaultGrace).
	Grace time.Duration
	// ParkGrace is how long a parked agent may go on before it is stopped
	// (DefaultParkGrace).
	ParkGrace time.Duration
	// LogLimit and StreamLimit cap the log and the transcript in bytes.
	LogLimit, StreamLimit int64
	// Workspaces is the root of the per-Work git checkouts; a binding
	// whose workdir names a repository fails without it.
	Workspaces string
	// Git is the git program for checkouts ("git", looked up on PATH,
	// when empty).
	Git string
	// Path is the PATH the agent program is looked up on and the agent
	// runs with (the daemon's, or a default, when empty).
	Path string
	// Sandbox finds bwrap for sandboxed bindings (the default); a Runtime
	// that looks bwrap up on PATH when nil.
	Sandbox *sandbox.Runtime
}

// Executor runs one agent CLI through its Driver. It is safe for
// concurrent use.
type Executor struct {
	spec   agent.Spec
	info   executor.Info
	driver Driver
	opts   Options
	sup    *proc.Supervisor
}

var (
	_ executor.Executor       = (*Executor)(nil)
	_ executor.Preflighter    = (*Executor)(nil)
	_ extension.PlaybookNamer = (*Executor)(nil)
)

// ErrNoSession: a Resume was given no session to continue.
var ErrNoSession = errors.New("the execution recorded no agent session to resume; run a new attempt instead")

const defaultPath = "/usr/local/bin:/usr/bin:/bin"

// New returns an executor of the agent described by spec and info, driven
// by d.
func New(spec agent.Spec, info executor.Info, d Driver, opts Options) (*Executor, error) {
	if opts.Supervisor == "" {
		return nil, fmt.Errorf("%s executor: no supervisor program given; pass the path of the open-conduit binary", spec.Executor)
	}
	if opts.Clock == nil {
		return nil, fmt.Errorf("%s executor: it needs a Clock", spec.Executor)
	}
	if opts.After == nil {
		opts.After = time.After
	}
	if opts.Grace <= 0 {
		opts.Grace = DefaultGrace
	}
	if opts.ParkGrace <= 0 {
		opts.ParkGrace = DefaultParkGrace
	}
	if opts.LogLimit <= 0 {
		opts.LogLimit = DefaultLogLimit
	}
	if opts.StreamLimit <= 0 {
		opts.StreamLimit = DefaultStreamLimit
	}
	if opts.Git == "" {
		opts.Git = "git"
	}
	if opts.Path == "" {
		opts.Path = os.Getenv("PATH")
	}
	if opts.Path == "" {
		opts.Path = defaultPath
	}
	if opts.Sandbox == nil {
		opts.Sandbox = &sandbox.Runtime{}
	}
	return &Executor{spec: spec, info: info, driver: d, opts: opts, sup: &proc.Supervisor{Program: opts.Supervisor, After: opts.After}}, nil
}

// Info describes the executor.
func (e *Executor) Info() executor.Info { return e.info }

// PlaybookName names the playbook a (checked) binding config starts the
// agent's turns on.
func (e *Executor) PlaybookName(config json.RawMessage) string {
	return agent.Namer{Spec: e.spec}.PlaybookName(config)
}

// Run starts the agent's first segment on the playbook and the prompt
// rendered over req.Events, and waits until it ends (or ctx ends, with
// ErrDetached: the agent keeps running).
func (e *Executor) Run(ctx context.Context, req executor.RunRequest) (executor.Result, error) {
	return e.begin(ctx, req, false)
}

// Resume starts a segment that continues req.Session with the Events that
// woke the execution as its prompt.
func (e *Executor) Resume(ctx context.Context, req executor.RunRequest) (executor.Result, error) {
	if req.Session == "" {
		return executor.Result{}, e.errorf("%w", ErrNoSession)
	}
	return e.begin(ctx, req, true)
}

func (e *Executor) errorf(format string, args ...any) error {
	return fmt.Errorf(e.spec.Executor+" executor: "+format, args...)
}

func (e *Executor) begin(ctx context.Context, req executor.RunRequest, resume bool) (executor.Result, error) {
	cfg, err := agent.ParseConfig(e.spec, req.Config)
	if err != nil {
		return executor.Result{}, err
	}
	if req.Dir == "" {
		return executor.Result{}, e.errorf("the run request names no execution directory")
	}
	if req.Dir, err = filepath.Abs(req.Dir); err != nil {
		return executor.Result{}, err
	}
	seg := &Segment{Config: cfg, Request: req, Home: filepath.Join(req.Dir, homeDir), Dir: segmentDir(req.Dir, req.Epoch), Resume: resume, Session: req.Session}
	for _, d := range []string{seg.Home, filepath.Join(seg.Home, "tmp"), seg.Dir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return executor.Result{}, e.errorf("cannot create the execution's directories: %s", proc.ErrText(err))
		}
	}
	if proc.Started(seg.Dir) {
		return executor.Result{}, e.errorf("%w", proc.ErrAlreadyStarted)
	}
	now := e.opts.Clock.Now()
	deadline := now.Add(cfg.Timeout)
	if !req.Deadline.IsZero() && req.Deadline.Before(deadline) {
		deadline = req.Deadline
	}
	if !now.Before(deadline) {
		return executor.Result{Outcome: executor.Failed, ExitCode: -1, Message: "the attempt's deadline passed before the agent started"}, nil
	}
	if seg.Workdir, err = e.workdir(ctx, req, cfg); err != nil {
		return executor.Result{Outcome: executor.Failed, ExitCode: -1, Message: err.Error()}, nil
	}
	program, err := e.program(cfg.Binary)
	if err != nil {
		return executor.Result{Outcome: executor.Failed, ExitCode: -1, Message: err.Error()}, nil
	}
	if env := cfg.Secrets["api_key"]; env != "" {
		seg.APIKey = req.Env[env]
	}
	if seg.APIKey == "" {
		return executor.Result{Outcome: executor.Failed, ExitCode: -1, Message: "the binding gives the agent no model API key: name it in the binding's secrets under the variable its config's secrets.api_key names"}, nil
	}
	if req.Context.ToolbeltDir == "" || req.Context.ToolbeltEndpoint == "" || req.Context.ToolbeltTokenFile == "" {
		return executor.Result{}, e.errorf("the run request gives no toolbelt endpoint, token file or os program; the agent reaches the toolbelt only through os mcp")
	}
	var box *sandbox.Spec
	if cfg.Sandbox.Enabled {
		prog, err := e.opts.Sandbox.Check()
		if err != nil {
			return executor.Result{}, err
		}
		box = &sandbox.Spec{Program: prog, OS: filepath.Join(req.Context.ToolbeltDir, "os"),
			Endpoint: req.Context.ToolbeltEndpoint, TokenFile: req.Context.ToolbeltTokenFile, Playbooks: req.Context.PlaybookDir,
			ReadOnly: cfg.Sandbox.ReadOnly, Writable: []string{seg.Home, seg.Workdir}, Dir: seg.Workdir}
		// The agent is told the paths it sees inside; its playbook is
		// copied into its home from the host's directory first.
		inside, err := sandboxInside(*box)
		if err != nil {
			return executor.Result{}, e.errorf("%w", err)
		}
		req.Context.ToolbeltDir, req.Context.ToolbeltEndpoint, req.Context.ToolbeltTokenFile = inside.BinDir, inside.Endpoint, inside.TokenFile
		seg.Request = req
	}
	seg.MCP = MCPServer{
		Command: filepath.Join(req.Context.ToolbeltDir, "os"),
		Args:    []string{"mcp"},
		Env:     map[string]string{"OS_ENDPOINT": req.Context.ToolbeltEndpoint, "OS_TOKEN_FILE": req.Context.ToolbeltTokenFile},
	}

	var prompt string
	if resume {
		prompt = ResumePrompt(req.Events)
	} else {
		text, err := RenderPrompt(cfg, req)
		if err != nil {
			return executor.Result{Outcome: executor.Failed, ExitCode: -1, Message: err.Error()}, nil
		}
		prompt = e.driver.FirstPrompt(text, cfg.Playbook)
	}
	if cfg.Playbook != "" {
		if err := installSkill(req.Context.PlaybookDir, e.driver.SkillsDir(seg.Home), cfg.Playbook); err != nil {
			return executor.Result{Outcome: executor.Failed, ExitCode: -1, Message: err.Error()}, nil
		}
	}
	if err := os.MkdirAll(e.driver.ConfigHome(seg.Home), 0o700); err != nil {
		return executor.Result{}, e.errorf("cannot create the agent's configuration home: %s", proc.ErrText(err))
	}
	if err := e.driver.Prepare(seg); err != nil {
		return executor.Result{}, e.errorf("cannot write the agent's configuration: %w", err)
	}
	if err := os.WriteFile(filepath.Join(seg.Dir, promptFile), []byte(prompt), 0o600); err != nil {
		return executor.Result{}, e.errorf("cannot write the prompt: %s", proc.ErrText(err))
	}
	if err := proc.WriteJSONFile(seg.Dir, segmentFile, segmentRecord{Deadline: deadline}); err != nil {
		return executor.Result{}, e.errorf("cannot record the segment: %s", proc.ErrText(err))
	}
	args, extra := e.driver.Command(seg)
	l := proc.Launch{
		Argv: append([]string{program}, args...), Env: e.environment(seg, extra), Dir: seg.Workdir,
		LogLimit: e.opts.LogLimit, Stream: streamFile, StreamLimit: e.opts.StreamLimit, Stdin: promptFile,
	}
	if box != nil {
		box.Argv = l.Argv
		if l.Argv, _, err = sandbox.Wrap(*box); err != nil {
			return executor.Result{}, e.errorf("%w", err)
		}
		l.IgnoreStopSignals = true
		l.Env = withProxy(l.Env)
	}
	h, err := e.sup.Start(seg.Dir, l)
	if err != nil {
		return executor.Result{}, e.errorf("%w", err)
	}
	return e.observe(ctx, req, seg.Dir, h, deadline)
}

// Preflight says, before anything is launched, that a sandboxed binding
// cannot run on this machine (an *executor.UnavailableError).
func (e *Executor) Preflight(config json.RawMessage) error {
	cfg, err := agent.ParseConfig(e.spec, config)
	if err != nil || !cfg.Sandbox.Enabled {
		return nil
	}
	_, err = e.opts.Sandbox.Check()
	return err
}

// sandboxInside is what the agent is told of the toolbelt inside the
// sandbox s describes.
func sandboxInside(s sandbox.Spec) (sandbox.Inside, error) {
	s.Argv = []string{"true"}
	_, in, err := sandbox.Wrap(s)
	return in, err
}

// withProxy adds the proxy variables to a sandboxed agent's environment.
func withProxy(env []string) []string { return sandbox.WithEnv(env, sandbox.ProxyEnv()) }

// segmentRecord is what a later daemon needs of a segment beyond proc's.
type segmentRecord struct {
	Deadline time.Time `json:"deadline"`
}

func segmentDir(dir string, epoch int64) string {
	return filepath.Join(dir, segmentsDir, strconv.FormatInt(epoch, 10))
}

// currentSegment is the segment of req: its epoch's, else the latest one
// (highest epoch) the directory holds; "" for none.
func currentSegment(dir string, epoch int64) string {
	if d := segmentDir(dir, epoch); exists(d) {
		return d
	}
	entries, err := os.ReadDir(filepath.Join(dir, segmentsDir))
	if err != nil {
		return ""
	}
	best := int64(-1)
	for _, en := range entries {
		if n, err := strconv.ParseInt(en.Name(), 10, 64); err == nil && n > best && en.IsDir() {
			best = n
		}
	}
	if best < 0 {
		return ""
	}
	return segmentDir(dir, best)
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// environment is the agent's whole environment: PATH (the toolbelt's
// directory first), HOME and TMPDIR inside the execution, LANG, the
// toolbelt's endpoint and token file, the execution's ids, and the
// driver's own (its configuration home, the model API key).
func (e *Executor) environment(seg *Segment, extra map[string]string) []string {
	req := seg.Request
	env := map[string]string{
		"PATH":                      req.Context.ToolbeltDir + string(os.PathListSeparator) + e.opts.Path,
		"HOME":                      seg.Home,
		"TMPDIR":                    filepath.Join(seg.Home, "tmp"),
		"OS_ENDPOINT":               req.Context.ToolbeltEndpoint,
		"OS_TOKEN_FILE":             req.Context.ToolbeltTokenFile,
		"OPEN_CONDUIT_EXECUTION_ID": req.ExecutionID,
		"OPEN_CONDUIT_WORK_ID":      req.WorkID,
		"OPEN_CONDUIT_SCOPE_ID":     req.ScopeID,
	}
	if v, ok := os.LookupEnv("LANG"); ok {
		env["LANG"] = v
	}
	for k, v := range extra {
		env[k] = v
	}
	list := make([]string, 0, len(env))
	for k, v := range env {
		list = append(list, k+"="+v)
	}
	slices.Sort(list)
	return list
}

// program resolves the agent program: an absolute path as it is, a name
// on the PATH.
func (e *Executor) program(binary string) (string, error) {
	if filepath.IsAbs(binary) {
		return binary, nil
	}
	for _, dir := range filepath.SplitList(e.opts.Path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, binary)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("the agent program was not found on the daemon's PATH: install %s or give its absolute path as the config's binary", e.spec.Binary)
}

// Recover re-attaches to the execution's current segment: its recorded
// result if it ended, the running supervisor if it still runs (its stream
// followed for a park as Run does), ErrGone if neither is there.
func (e *Executor) Recover(ctx context.Context, req executor.RunRequest) (executor.Result, error) {
	if req.Dir == "" {
		return executor.Result{}, e.errorf("the run request names no execution directory")
	}
	var err error
	if req.Dir, err = filepath.Abs(req.Dir); err != nil {
		return executor.Result{}, err
	}
	dir := currentSegment(req.Dir, req.Epoch)
	if dir == "" {
		return executor.Result{}, executor.ErrGone
	}
	if res, ended, err := e.outcome(req, dir); ended || err != nil {
		return res, err
	}
	h, err := e.sup.Attach(dir)
	if errors.Is(err, proc.ErrNoProcess) {
		if res, ended, err := e.outcome(req, dir); ended || err != nil {
			return res, err
		}
		// A launch file left by a daemon that died before its supervisor
		// started holds the model API key.
		os.Remove(filepath.Join(dir, proc.LaunchFile))
		return executor.Result{}, executor.ErrGone
	}
	if err != nil {
		return executor.Result{}, e.errorf("%w", err)
	}
	var rec segmentRecord
	if _, err := proc.ReadJSONFile(dir, segmentFile, &rec); err != nil {
		h.Close()
		return executor.Result{}, e.errorf("%w", err)
	}
	return e.observe(ctx, req, dir, h, rec.Deadline)
}

// Stop ends the current segment's whole process group (SIGTERM, then
// SIGKILL after grace) and records that it was stopped on request.
func (e *Executor) Stop(ctx context.Context, req executor.RunRequest, grace time.Duration) error {
	if req.Dir == "" {
		return e.errorf("the run request names no execution directory")
	}
	dir, err := filepath.Abs(req.Dir)
	if err != nil {
		return err
	}
	seg := currentSegment(dir, req.Epoch)
	if seg == "" {
		return nil
	}
	if err := e.sup.StopDir(ctx, seg, grace, stopCancel); err != nil {
		return e.errorf("%w", err)
	}
	return nil
}

// observe waits for the segment of h to end. It follows the stream: once a
// wait or declare_outcome succeeded, the agent has ParkGrace to end by
// itself before its group is stopped. The deadline stops it too.
func (e *Executor) observe(ctx context.Context, req executor.RunRequest, dir string, h *proc.Handle, deadline time.Time) (executor.Result, error) {
	defer h.Close()
	f := startFollowing(dir, streamFile, e.driver.NewParser, parked)
	defer f.close()
	var deadlineC <-chan time.Time
	if !deadline.IsZero() {
		deadlineC = e.opts.After(max(0, deadline.Sub(e.opts.Clock.Now())))
	}
	parkedC := f.parked()
	var graceC <-chan time.Time
	stop := func(reason string) error {
		if err := e.sup.Stop(ctx, dir, h, e.opts.Grace, reason); err != nil {
			if ctx.Err() != nil {
				return executor.ErrDetached
			}
			return e.errorf("%w", err)
		}
		return nil
	}
wait:
	for {
		select {
		case <-h.Done():
			break wait
		case <-ctx.Done():
			return executor.Result{}, executor.ErrDetached
		case <-deadlineC:
			if err := stop(stopDeadline); err != nil {
				return executor.Result{}, err
			}
			break wait
		case <-parkedC:
			parkedC = nil
			graceC = e.opts.After(e.opts.ParkGrace)
		case <-graceC:
			if err := stop(stopParked); err != nil {
				return executor.Result{}, err
			}
			break wait
		}
	}
	res, _, err := e.outcome(req, dir)
	return res, err
}

// parked reports whether a summary shows a successful wait or
// declare_outcome.
func parked(s Summary) bool {
	return slices.Contains(s.Succeeded, WaitTool) || slices.Contains(s.Succeeded, OutcomeTool)
}

var detailRule = regexp.MustCompile(`^[a-z][a-z0-9_.]{0,63}$`)

// outcome turns what the supervisor recorded and the stream told into the
// segment's result; ended is false when the supervisor recorded nothing
// (yet).
func (e *Executor) outcome(req executor.RunRequest, dir string) (res executor.Result, ended bool, err error) {
	st, ok, err := proc.ReadStatus(dir)
	if err != nil {
		return executor.Result{}, false, err
	}
	sum := e.summary(dir)
	res = executor.Result{Outcome: executor.Failed, ExitCode: -1, Session: sum.Session, Usage: sum.Usage}
	if res.Session == "" {
		res.Session = req.Session
	}
	if st.Exited {
		res.ExitCode = st.ExitCode
	}
	var what string
	switch {
	case !ok:
		what = "the supervisor ended without recording how the agent ended"
	case st.StartError != "":
		what = st.StartError
	case st.Exited:
		what = fmt.Sprintf("the agent exited with status %d", st.ExitCode)
	default:
		what = "the agent was killed by " + st.Signal
	}
	last := lastOf(sum.Succeeded, WaitTool, OutcomeTool)
	reason := proc.ReadStop(dir)
	switch {
	case reason == stopCancel:
		res.Outcome = executor.Cancelled
		res.Message = "the agent was stopped on request: " + what
	case last == WaitTool:
		res.Outcome = executor.Suspended
		res.Message = "the agent waited; the segment parked"
		if reason == stopParked {
			res.Message += " (the agent was stopped after its grace: " + what + ")"
		}
	case last == OutcomeTool:
		res.Outcome = executor.Succeeded
		res.Message = "the agent declared the Work's outcome"
		if reason == stopParked {
			res.Message += " (the agent was stopped after its grace: " + what + ")"
		}
	case reason == stopDeadline:
		res.Message = "the segment's time limit (the config's timeout or the attempt's deadline) passed and the agent was stopped: " + what
	case ok && st.Exited && st.ExitCode == 0 && sum.Finished && sum.OK:
		res.Outcome = executor.Succeeded
		res.Message = "the agent finished its turn"
	case sum.Finished && !sum.OK:
		res.Message = "the agent reported that its turn failed"
		if detailRule.MatchString(sum.Detail) {
			res.Message += " (" + sum.Detail + ")"
		}
		res.Message += ": " + what
	case !sum.Finished && ok && st.StartError == "":
		res.Message = "the agent ended without reporting a result: " + what
	default:
		res.Message = what
	}
	if st.LogTruncated {
		res.Message += " (its log was cut at the log limit)"
	}
	if st.StreamTruncated {
		res.Message += " (its transcript was cut at its limit)"
	}
	if exists(filepath.Join(dir, proc.LogFile)) {
		res.Artifacts = append(res.Artifacts, executor.Artifact{Name: "log", MediaType: "text/plain; charset=utf-8", Path: filepath.Join(dir, proc.LogFile)})
	}
	if exists(filepath.Join(dir, streamFile)) {
		res.Artifacts = append(res.Artifacts, executor.Artifact{Name: "transcript", MediaType: "application/x-ndjson", Path: filepath.Join(dir, streamFile)})
	}
	return res, ok, nil
}

// lastOf returns whichever of a and b comes last in list ("" for neither).
func lastOf(list []string, a, b string) string {
	for i := len(list) - 1; i >= 0; i-- {
		if list[i] == a || list[i] == b {
			return list[i]
		}
	}
	return ""
}

func (e *Executor) summary(dir string) Summary {
	f, err := os.Open(filepath.Join(dir, streamFile))
	if err != nil {
		return Summary{}
	}
	defer f.Close()
	return Parse(f, e.driver.NewParser())
}

// installSkill copies the playbook's SKILL.md from the host's playbook
// directory (skills/<name>/SKILL.md) into the agent's skills directory.
func installSkill(playbookDir, skillsDir, name string) error {
	if playbookDir == "" {
		return errors.New("the host gives no playbook directory, so the config's playbook cannot be installed")
	}
	b, err := os.ReadFile(filepath.Join(playbookDir, "skills", name, "SKILL.md"))
	if err != nil {
		return errors.New("the config's playbook is not in the host's playbook directory (" + proc.ErrText(err) + "); check that an extension or the operator provides it")
	}
	dst := filepath.Join(skillsDir, name)
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return errors.New("cannot create the agent's skill directory: " + proc.ErrText(err))
	}
	if err := os.WriteFile(filepath.Join(dst, "SKILL.md"), b, 0o600); err != nil {
		return errors.New("cannot install the playbook as the agent's skill: " + proc.ErrText(err))
	}
	return nil
}

var _ executor.LiveLogger = (*Executor)(nil)

// LiveLog is where the segment of epoch writes the agent's log (its
// standard error): that epoch's segment directory, or, for an adopted
// segment whose epoch moved on, the latest segment the directory holds.
func (e *Executor) LiveLog(dir string, epoch int64) (string, bool) {
	seg := currentSegment(dir, epoch)
	if seg == "" {
		seg = segmentDir(dir, epoch)
	}
	return filepath.Join(seg, proc.LogFile), true
}
