package mcppkg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/buildinfo"
	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/packages"
)

// The stable codes of the operation errors an MCP package's operations
// answer (422, recorded and replayed like any operation's refusal).
const (
	// CodeToolError: the tool answered with isError; the message is the
	// text of its content, bounded.
	CodeToolError = "mcp_tool_error"
	// CodeInvalidArguments: the server refused the call's arguments
	// (JSON-RPC -32602); the message is the server's, bounded.
	CodeInvalidArguments = "mcp_invalid_arguments"
	// CodeToolUnavailable: the server no longer lists the tool (it
	// changed its tool list after a restart or a list_changed
	// notification); the registered operations stay as they were.
	CodeToolUnavailable = "mcp_tool_unavailable"
	// CodeResultTooLarge: the tool's result is larger than the host
	// records.
	CodeResultTooLarge = "mcp_result_too_large"
)

// RequestIDMeta is the _meta key of a tools/call that carries the
// toolbelt call's request ID, so that a server that wants to can
// deduplicate a call the host repeats.
const RequestIDMeta = "open-conduit/request_id"

// Options configures the runtime. The zero value of each field means its
// default.
type Options struct {
	// Clock is when crashes happen (crash loops are counted on it).
	// Default: the system clock.
	Clock clock.Clock
	// After is the injected timer of backoffs, start timeouts and stop
	// grace periods. Default: time.After.
	After func(time.Duration) <-chan time.Time
	// Logger gets skipped tools, crashes and restarts (never the server's
	// output). Default: discarded.
	Logger *slog.Logger
	// Environ is the daemon's environment ("KEY=value"), of which the
	// server gets only what packages.InheritedEnv names, under the
	// manifest's run.env (packages.ProcessEnv). Default: os.Environ().
	Environ []string
	// Stderr receives the server's stderr when LogDir is not set.
	// Default: discarded.
	Stderr io.Writer
	// LogDir, when set, is where each server's stderr is written, as
	// <name>.log, renamed to <name>.log.1 when it reaches StderrLimit (as
	// protocol packages' are).
	LogDir string
	// StderrLimit bounds each server's log file. Default: 256 KiB.
	StderrLimit int
	// StartTimeout bounds starting, initializing and listing the tools.
	// Default: 30s.
	StartTimeout time.Duration
	// StopGrace is how long Stop waits after closing the server's stdin
	// before SIGTERM of its group, and after SIGTERM before SIGKILL.
	// Default: 5s.
	StopGrace time.Duration
	// MinBackoff and MaxBackoff bound the wait before a restart: MinBackoff
	// doubled for every other crash within CrashLoopWindow. Defaults: 1s
	// and 1m.
	MinBackoff, MaxBackoff time.Duration
	// CrashLoopCount crashes within CrashLoopWindow are a crash loop.
	// Defaults: 3 and 5m.
	CrashLoopCount  int
	CrashLoopWindow time.Duration
	// MaxResult bounds a tool's result, in bytes of JSON. Default: 1 MiB.
	MaxResult int
}

func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = clock.System{}
	}
	if o.After == nil {
		o.After = time.After
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Environ == nil {
		o.Environ = os.Environ()
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	if o.StderrLimit <= 0 {
		o.StderrLimit = 256 << 10
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 30 * time.Second
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 5 * time.Second
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(time.Minute, o.MinBackoff)
	}
	if o.CrashLoopCount <= 0 {
		o.CrashLoopCount = 3
	}
	if o.CrashLoopWindow <= 0 {
		o.CrashLoopWindow = 5 * time.Minute
	}
	if o.MaxResult <= 0 {
		o.MaxResult = 1 << 20
	}
	return o
}

// Runtime runs MCP packages (packages.KindMCP).
type Runtime struct{ opts Options }

var _ packages.Runtime = (*Runtime)(nil)

// NewRuntime returns the runtime of MCP packages.
func NewRuntime(opts Options) *Runtime { return &Runtime{opts: opts.withDefaults()} }

// Start starts the package's server from its directory, initializes it
// and lists its tools (every page); the tools it lists now are the
// Instance's operations for as long as it runs. It fails, leaving no
// process, when the server cannot be started, initialized or listed
// within StartTimeout.
func (r *Runtime) Start(ctx context.Context, pkg packages.Installed) (packages.Instance, error) {
	m := pkg.Manifest
	if m.Kind != packages.KindMCP {
		return nil, fmt.Errorf("%w: mcppkg runs packages of kind %q only", extension.ErrInvalid, packages.KindMCP)
	}
	if err := extension.RegistrationName(m.Name); err != nil {
		return nil, err
	}
	path, args, err := command(pkg.Dir, m.Run.Command)
	if err != nil {
		return nil, err
	}
	in := &Instance{
		pkg:   pkg,
		opts:  r.opts,
		log:   r.opts.Logger.With("package", m.Name),
		path:  path,
		args:  args,
		env:   packages.ProcessEnv(r.opts.Environ, m.Run),
		force: make(chan struct{}),
		done:  make(chan struct{}),
	}
	in.stderr = r.opts.Stderr
	if r.opts.LogDir != "" {
		sl, err := packages.NewStderrLog(r.opts.LogDir, m.Name, r.opts.StderrLimit)
		if err != nil {
			return nil, fmt.Errorf("mcppkg: package %s: its log cannot be opened: %w", m.Name, err)
		}
		in.logFile = sl
		in.stderr = sl
	}
	in.ctx, in.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s, listed, err := in.launch(ctx)
	if err != nil {
		in.cancel()
		in.closeLog()
		return nil, err
	}
	in.tools, in.skipped = mapTools(m.Name, listed)
	for _, sk := range in.skipped {
		in.log.Warn("mcp package: a tool of the server is not registered", "tool", sk.Tool, "reason", sk.Reason)
	}
	byName := map[string]bool{}
	for _, t := range in.tools {
		byName[t.name] = true
	}
	in.registered = byName
	in.reg = extension.Registration{
		Name:       m.Name,
		Operations: operations(in.tools, in.handler),
		Toolsets:   toolsets(m.Name, m.Version, in.tools),
		OptIn:      true,
	}
	in.adopt(s, listed)
	go in.supervise(s)
	return in, nil
}

// Instance is a running MCP package.
type Instance struct {
	pkg  packages.Installed
	opts Options
	log  *slog.Logger
	path string
	args []string
	env  []string
	// stderr gets the server's stderr: logFile when the runtime has a
	// LogDir, else Options.Stderr.
	stderr  io.Writer
	logFile *packages.StderrLog

	// Fixed at Start.
	tools      []tool
	skipped    []Skipped
	registered map[string]bool // the registered tools' server names
	reg        extension.Registration

	ctx    context.Context // cancelled by Stop
	cancel context.CancelFunc
	force  chan struct{} // closed when Stop's context ends first
	done   chan struct{} // closed when the supervisor has stopped the server

	stopOnce, forceOnce sync.Once

	mu      sync.Mutex
	cur     *session // nil while the server is not running
	health  packages.Health
	crashes []time.Time // within the crash-loop window
}

var _ packages.Instance = (*Instance)(nil)

// session is one run of the server and the MCP session over its stdio.
type session struct {
	p     *process
	cs    *mcp.ClientSession
	ended chan struct{} // closed when the MCP connection has ended
	avail map[string]bool
}

// Registration is the package's registration: an operation per tool,
// <name>.read and <name>.all, OptIn.
func (in *Instance) Registration() extension.Registration { return in.reg }

// Executors: an MCP package provides none.
func (in *Instance) Executors() []executor.Executor { return nil }

// Skipped are the server's tools that have no operation, and why.
func (in *Instance) Skipped() []Skipped { return append([]Skipped(nil), in.skipped...) }

// Health says whether the server runs and whether it is in a crash loop.
func (in *Instance) Health() packages.Health {
	in.mu.Lock()
	defer in.mu.Unlock()
	h := in.health
	h.CrashLoop = len(in.recentCrashes()) >= in.opts.CrashLoopCount
	return h
}

// Stop stops the server: its stdin is closed, then its group is sent
// SIGTERM, then SIGKILL, StopGrace apart (at once when ctx ends first). It
// returns when the server has been reaped; it is idempotent.
func (in *Instance) Stop(ctx context.Context) error {
	in.stopOnce.Do(in.cancel)
	select {
	case <-in.done:
	case <-ctx.Done():
		in.forceOnce.Do(func() { close(in.force) })
		<-in.done
	}
	return nil
}

// launch starts one run of the server, initializes it and lists every
// page of its tools, within StartTimeout. It leaves no process behind when
// it fails.
func (in *Instance) launch(ctx context.Context) (*session, []*mcp.Tool, error) {
	p, err := startProcess(in.pkg.Dir, in.path, in.args, in.env, in.stderr)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-in.opts.After(in.opts.StartTimeout):
			cancel()
		case <-ctx.Done():
		}
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "open-conduit", Version: buildinfo.Version()}, &mcp.ClientOptions{
		ToolListChangedHandler: in.toolsChanged,
	})
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: p.stdout, Writer: p.stdin}, nil)
	if err != nil {
		p.kill()
		return nil, nil, &StartError{Step: "initialize"}
	}
	listed, err := listTools(ctx, cs)
	if err != nil {
		p.kill()
		cs.Close()
		return nil, nil, &StartError{Step: "list tools"}
	}
	s := &session{p: p, cs: cs, ended: make(chan struct{})}
	go func() {
		_ = cs.Wait()
		close(s.ended)
	}()
	return s, listed, nil
}

// listTools lists every page of the server's tools.
func listTools(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Tool, error) {
	var out []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// adopt makes s the running server, with the tools it lists now as the
// ones calls may reach; a registered tool it no longer lists is refused
// with CodeToolUnavailable, and a tool it lists that was not registered
// stays unregistered until the package is started again.
func (in *Instance) adopt(s *session, listed []*mcp.Tool) {
	s.avail = in.available(listed)
	in.mu.Lock()
	in.cur = s
	in.health.State = "running"
	in.mu.Unlock()
}

// available is which registered tools a tool list still has, logging the
// differences.
func (in *Instance) available(listed []*mcp.Tool) map[string]bool {
	avail := map[string]bool{}
	for _, t := range listed {
		if in.registered[t.Name] {
			avail[t.Name] = true
		} else if in.registered != nil && !in.wasSkipped(t.Name) {
			in.log.Warn("mcp package: the server lists a tool it did not list at start; it stays unregistered until the package is started again", "tool", quoted(t.Name))
		}
	}
	for name := range in.registered {
		if !avail[name] {
			in.log.Warn("mcp package: the server no longer lists a registered tool; its calls are refused", "tool", quoted(name), "code", CodeToolUnavailable)
		}
	}
	return avail
}

func (in *Instance) wasSkipped(name string) bool {
	for _, sk := range in.skipped {
		if sk.Tool == quoted(name) {
			return true
		}
	}
	return false
}

// toolsChanged follows the server's notifications/tools/list_changed:
// the tools calls may reach become those it lists now (the registered
// set does not change).
func (in *Instance) toolsChanged(_ context.Context, req *mcp.ToolListChangedRequest) {
	cs := req.Session
	in.mu.Lock()
	ours := in.cur != nil && in.cur.cs == cs // not before Start registered
	in.mu.Unlock()
	if !ours {
		return
	}
	go func() {
		ctx, cancel := context.WithCancel(in.ctx)
		defer cancel()
		go func() {
			select {
			case <-in.opts.After(in.opts.StartTimeout):
				cancel()
			case <-ctx.Done():
			}
		}()
		listed, err := listTools(ctx, cs)
		if err != nil {
			return
		}
		avail := in.available(listed)
		in.mu.Lock()
		if in.cur != nil && in.cur.cs == cs {
			in.cur.avail = avail
		}
		in.mu.Unlock()
	}()
}

// supervise watches the running server until Stop: a server that exits or
// whose connection ends is a crash, followed by restarts after a backoff
// until one starts.
func (in *Instance) supervise(s *session) {
	defer close(in.done)
	defer in.closeLog()
	for {
		select {
		case <-in.ctx.Done():
			in.shutdown(s)
			return
		case <-s.p.exited:
		case <-s.ended:
		}
		in.mu.Lock()
		in.cur = nil
		in.mu.Unlock()
		s.p.kill()
		s.cs.Close()
		in.crashed(exitSentence(s.p.state))
		for s = nil; s == nil; {
			d := in.backoff()
			in.setState("restarting")
			in.log.Warn("mcp package: the server will be restarted", "after", d.String())
			select {
			case <-in.ctx.Done():
				in.setState("stopped")
				return
			case <-in.opts.After(d):
			}
			in.mu.Lock()
			in.health.State = "starting"
			in.health.Restarts++
			in.mu.Unlock()
			ns, listed, err := in.launch(in.ctx)
			if err != nil {
				if in.ctx.Err() != nil {
					in.setState("stopped")
					return
				}
				in.crashed(err.Error())
				continue
			}
			in.adopt(ns, listed)
			in.log.Info("mcp package: the server was restarted")
			s = ns
		}
	}
}

// shutdown stops the running server politely (Stop).
func (in *Instance) shutdown(s *session) {
	in.mu.Lock()
	in.cur = nil
	in.mu.Unlock()
	closed := make(chan struct{})
	go func() {
		s.cs.Close()
		close(closed)
	}()
	s.p.stop(in.opts.StopGrace, in.opts.After, in.force)
	<-closed
	in.setState("stopped")
}

// closeLog closes the server's log file, once no run of it is left.
func (in *Instance) closeLog() {
	if in.logFile != nil {
		in.logFile.Close()
	}
}

func (in *Instance) setState(state string) {
	in.mu.Lock()
	in.health.State = state
	in.mu.Unlock()
}

// crashed records a crash at the clock's time, with a safe sentence.
func (in *Instance) crashed(why string) {
	in.mu.Lock()
	in.crashes = append(in.recentCrashes(), in.opts.Clock.Now())
	in.health.LastError = why
	n := len(in.crashes)
	in.mu.Unlock()
	in.log.Warn("mcp package: the server crashed", "why", why, "recent_crashes", n)
}

// recentCrashes are the crashes within the window before now. mu is held.
func (in *Instance) recentCrashes() []time.Time {
	now := in.opts.Clock.Now()
	out := in.crashes[:0]
	for _, t := range in.crashes {
		if now.Sub(t) < in.opts.CrashLoopWindow {
			out = append(out, t)
		}
	}
	in.crashes = out
	return out
}

// backoff is the wait before the next restart: MinBackoff doubled for
// every crash within the window but the first, at most MaxBackoff.
func (in *Instance) backoff() time.Duration {
	in.mu.Lock()
	n := len(in.recentCrashes())
	in.mu.Unlock()
	d := in.opts.MinBackoff
	for i := 1; i < n && d < in.opts.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, in.opts.MaxBackoff)
}

// UnavailableError is a call while the server is not running (it crashed
// and waits out its backoff, or it is stopped). The host answers 500 and
// records nothing, so the caller may repeat the call with its request ID.
type UnavailableError struct{}

func (*UnavailableError) Error() string { return "mcppkg: the MCP server is not running" }

// TransportError is a call that failed on its way to or from the server
// (the server crashed or broke the protocol). The host answers 500 and
// records nothing; whether the tool ran is unknown.
type TransportError struct{}

func (*TransportError) Error() string {
	return "mcppkg: the call to the MCP server failed in transport (the error's text is not shown)"
}

// handler is the operation of one tool: tools/call with the input as its
// arguments and the request ID in its _meta.
func (in *Instance) handler(t tool) extension.Handler {
	return func(ctx context.Context, auth extension.Authority, input json.RawMessage) (json.RawMessage, error) {
		in.mu.Lock()
		s := in.cur
		var avail bool
		if s != nil {
			avail = s.avail[t.name]
		}
		in.mu.Unlock()
		if s == nil {
			return nil, &UnavailableError{}
		}
		if !avail {
			return nil, &extension.OperationError{Code: CodeToolUnavailable, Message: "the MCP server no longer lists this tool; the operation stays registered until the package is started again"}
		}
		if len(input) == 0 || string(input) == "null" {
			input = json.RawMessage(`{}`)
		}
		params := &mcp.CallToolParams{Name: t.name, Arguments: input}
		if auth.RequestID != "" {
			params.Meta = mcp.Meta{RequestIDMeta: auth.RequestID}
		}
		res, err := s.cs.CallTool(ctx, params)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			var we *jsonrpc.Error
			if errors.As(err, &we) && we.Code == jsonrpc.CodeInvalidParams {
				return nil, &extension.OperationError{Code: CodeInvalidArguments, Message: oneLine(we.Message, "the MCP server refused the arguments")}
			}
			return nil, &TransportError{}
		}
		if res.IsError {
			return nil, &extension.OperationError{Code: CodeToolError, Message: oneLine(textOf(res.Content), "the tool reported an error")}
		}
		out, err := resultJSON(res)
		if err != nil {
			return nil, &TransportError{}
		}
		if len(out) > in.opts.MaxResult {
			return nil, &extension.OperationError{Code: CodeResultTooLarge, Message: fmt.Sprintf("the tool's result is larger than %d bytes", in.opts.MaxResult)}
		}
		return out, nil
	}
}

// resultJSON is a tool's result as an operation's: its structuredContent
// when that is a JSON object; else {"content": [...]} (the content blocks
// in MCP's JSON form), with "structured" beside it when the server gave a
// structuredContent that is not an object.
func resultJSON(res *mcp.CallToolResult) (json.RawMessage, error) {
	content := res.Content
	if content == nil {
		content = []mcp.Content{}
	}
	var structured json.RawMessage
	if res.StructuredContent != nil {
		raw, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return nil, err
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) == nil && obj != nil {
			return raw, nil
		}
		structured = raw
	}
	return json.Marshal(struct {
		Content    []mcp.Content   `json:"content"`
		Structured json.RawMessage `json:"structured,omitempty"`
	}{content, structured})
}

// textOf joins the text of a result's text blocks.
func textOf(content []mcp.Content) string {
	var parts []string
	for _, c := range content {
		if tc, ok := c.(*mcp.TextContent); ok && tc.Text != "" {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, " ")
}

// oneLine is a server's text as a refusal's message: on one line, bounded,
// or fallback when it is empty.
func oneLine(s, fallback string) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return fallback
	}
	return bounded(s, maxMessage)
}
