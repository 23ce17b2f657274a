package pkgproto

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/extension/pkg"
	"github.com/open-conduit/open-conduit/internal/clock"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/packages"
)

// Defaults of Options.
const (
	DefaultCallTimeout     = 30 * time.Second
	DefaultGateTimeout     = 5 * time.Second
	DefaultStartTimeout    = 10 * time.Second
	DefaultStopTimeout     = 5 * time.Second
	DefaultBackoffInitial  = time.Second
	DefaultBackoffMax      = time.Minute
	DefaultCrashLoopCount  = 5
	DefaultCrashLoopWindow = time.Minute
	DefaultStderrLimit     = 256 << 10
)

// Options configure a Runtime; zero values take the defaults.
type Options struct {
	// Clock tells the time of crashes (clock.System when nil).
	Clock clock.Clock
	// After is the timer of every bound and backoff (time.After when nil).
	After func(time.Duration) <-chan time.Time
	// Logger receives the supervision's and the failures' lines (never a
	// package's output or an error's text it wrote). Discarded when nil.
	Logger *slog.Logger
	// CallTimeout bounds operation calls, translations and config.check.
	CallTimeout time.Duration
	// GateTimeout bounds operation.gate and work.start_gate; keep it below
	// the toolbelt's own gate timeout, so the package's failure is the one
	// logged.
	GateTimeout time.Duration
	// StartTimeout bounds the handshake.
	StartTimeout time.Duration
	// StopTimeout bounds the answer to shutdown, and then each of the
	// waits after SIGTERM and SIGKILL.
	StopTimeout time.Duration
	// BackoffInitial is the wait before the restart after a first crash;
	// it doubles for every crash within CrashLoopWindow, up to BackoffMax.
	BackoffInitial time.Duration
	BackoffMax     time.Duration
	// CrashLoopCount crashes within CrashLoopWindow are a crash loop.
	CrashLoopCount  int
	CrashLoopWindow time.Duration
	// HostVersion is the daemon's build, told in the handshake.
	HostVersion string
	// Wrap, when set, is the argument vector a package's command runs
	// under, such as the daemon's own `open-conduit reap`, a subreaper
	// that kills whatever the package leaves behind: it then gets SIGTERM
	// (not SIGKILL) as its parent-death signal, so it can reap.
	Wrap []string
	// Environ is the daemon's environment, of which a package gets only
	// what packages.InheritedEnv names (packages.ProcessEnv; os.Environ
	// when nil).
	Environ func() []string
	// StderrLimit bounds the captured stderr of each package, in memory
	// and in each file under LogDir.
	StderrLimit int
	// LogDir, when set, is where each package's stderr is also written, as
	// <name>.log, rotated to <name>.log.1 when it reaches StderrLimit.
	LogDir string
}

// Runtime is the packages.Runtime of protocol packages.
type Runtime struct {
	opts Options
}

var _ packages.Runtime = (*Runtime)(nil)

// NewRuntime returns a runtime with opts, defaults filled in.
func NewRuntime(opts Options) *Runtime {
	if opts.Clock == nil {
		opts.Clock = clock.System{}
	}
	if opts.After == nil {
		opts.After = time.After
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&opts.CallTimeout, DefaultCallTimeout)
	def(&opts.GateTimeout, DefaultGateTimeout)
	def(&opts.StartTimeout, DefaultStartTimeout)
	def(&opts.StopTimeout, DefaultStopTimeout)
	def(&opts.BackoffInitial, DefaultBackoffInitial)
	def(&opts.BackoffMax, DefaultBackoffMax)
	def(&opts.CrashLoopWindow, DefaultCrashLoopWindow)
	if opts.CrashLoopCount <= 0 {
		opts.CrashLoopCount = DefaultCrashLoopCount
	}
	if opts.StderrLimit <= 0 {
		opts.StderrLimit = DefaultStderrLimit
	}
	if opts.Environ == nil {
		opts.Environ = os.Environ
	}
	return &Runtime{opts: opts}
}

func (r *Runtime) after(d time.Duration) <-chan time.Time { return r.opts.After(d) }

// Health states.
const (
	StateStarting   = "starting"
	StateRunning    = "running"
	StateRestarting = "restarting"
	StateStopped    = "stopped"
)

// Instance is a running protocol package.
type Instance struct {
	rt     *Runtime
	pkg    packages.Installed
	name   string
	log    *slog.Logger
	stderr *packages.StderrLog

	reg       extension.Registration
	executors []executor.Executor

	mu       sync.Mutex
	cur      *proc
	state    string
	restarts int
	lastErr  string
	crashes  []time.Time
	looping  bool
	stopping bool

	stopCh    chan struct{}
	superDone chan struct{}
	stopOnce  sync.Once
	stopErr   error
}

var _ packages.Instance = (*Instance)(nil)

// Start starts pkg's process, shakes hands with it and supervises it. A
// package that does not start or whose handshake is refused is not run.
func (r *Runtime) Start(ctx context.Context, ins packages.Installed) (packages.Instance, error) {
	kind := ins.Manifest.Kind
	if kind != "" && kind != packages.KindProtocol {
		return nil, fmt.Errorf("pkgproto: package %s is of kind %s, not %s", ins.Manifest.Name, kind, packages.KindProtocol)
	}
	i := &Instance{rt: r, pkg: ins, name: ins.Manifest.Name, state: StateStarting,
		stopCh: make(chan struct{}), superDone: make(chan struct{})}
	i.log = r.opts.Logger.With("package", i.name)
	sl, err := packages.NewStderrLog(r.opts.LogDir, i.name, r.opts.StderrLimit)
	if err != nil {
		return nil, &StartError{Package: i.name, Reason: "its log cannot be opened", Err: err}
	}
	i.stderr = sl
	p, err := i.spawn(ctx)
	if err != nil {
		sl.Close()
		return nil, err
	}
	if err := i.build(p.serves); err != nil {
		p.stop(context.Background())
		sl.Close()
		return nil, err
	}
	i.cur, i.state = p, StateRunning
	i.log.Info("package started", "version", ins.Manifest.Version, "pid", p.pgid)
	go i.supervise(p)
	return i, nil
}

// Registration is what the host registers for the package.
func (i *Instance) Registration() extension.Registration { return i.reg }

// Executors are the package's executors.
func (i *Instance) Executors() []executor.Executor { return slices.Clone(i.executors) }

// Health says how the package's process fares.
func (i *Instance) Health() packages.Health {
	i.mu.Lock()
	defer i.mu.Unlock()
	return packages.Health{State: i.state, Restarts: i.restarts, CrashLoop: i.inLoop(), LastError: i.lastErr}
}

// Stderr is the tail of what the package wrote to its stderr, bounded by
// Options.StderrLimit. It is for the operator's eyes only: never answered
// to a caller or parsed.
func (i *Instance) Stderr() []byte { return i.stderr.Tail() }

// PID is the current process's id (0 while it is not running).
func (i *Instance) PID() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.cur == nil {
		return 0
	}
	return i.cur.pgid
}

// inLoop reports whether the crashes within the window make a crash loop.
// i.mu is held.
func (i *Instance) inLoop() bool {
	return i.recentCrashes() >= i.rt.opts.CrashLoopCount
}

func (i *Instance) recentCrashes() int {
	since := i.rt.opts.Clock.Now().Add(-i.rt.opts.CrashLoopWindow)
	n := 0
	for _, t := range i.crashes {
		if t.After(since) {
			n++
		}
	}
	return n
}

// current is the running process, or nil.
func (i *Instance) current() *proc {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.cur
}

// supervise restarts the process whenever it ends while it is meant to
// run, after a backoff.
func (i *Instance) supervise(p *proc) {
	defer close(i.superDone)
	for {
		select {
		case <-p.done:
		case <-i.stopCh:
			return
		}
		reason := p.exitDesc()
		for {
			backoff, ok := i.crashed(reason)
			if !ok {
				return
			}
			select {
			case <-i.rt.after(backoff):
			case <-i.stopCh:
				return
			}
			np, err := i.spawn(context.Background())
			if err != nil {
				i.log.Warn("package failed to restart", "error", err.Error())
				reason = "its restart failed: " + err.Error()
				continue
			}
			i.mu.Lock()
			if i.stopping {
				i.mu.Unlock()
				np.stop(context.Background())
				return
			}
			i.cur, i.state = np, StateRunning
			i.restarts++
			restarts := i.restarts
			i.mu.Unlock()
			i.log.Info("package restarted", "pid", np.pgid, "restarts", restarts)
			p = np
			break
		}
	}
}

// crashed records a crash and answers the backoff before the restart; ok
// is false when the instance is stopping.
func (i *Instance) crashed(reason string) (time.Duration, bool) {
	i.mu.Lock()
	if i.stopping {
		i.mu.Unlock()
		return 0, false
	}
	now := i.rt.opts.Clock.Now()
	since := now.Add(-i.rt.opts.CrashLoopWindow)
	kept := i.crashes[:0]
	for _, t := range i.crashes {
		if t.After(since) {
			kept = append(kept, t)
		}
	}
	i.crashes = append(kept, now)
	n := len(i.crashes)
	backoff := i.rt.opts.BackoffInitial
	for k := 1; k < n && backoff < i.rt.opts.BackoffMax; k++ {
		backoff *= 2
	}
	backoff = min(backoff, i.rt.opts.BackoffMax)
	i.cur, i.state, i.lastErr = nil, StateRestarting, reason
	loop := i.inLoop()
	newLoop := loop && !i.looping
	i.looping = loop
	i.mu.Unlock()
	if newLoop {
		i.log.Error("package is in a crash loop; it is restarted with a growing backoff", "crashes", n, "window", i.rt.opts.CrashLoopWindow, "backoff", backoff, "reason", reason)
	} else {
		i.log.Warn("package process ended; it is restarted after a backoff", "backoff", backoff, "reason", reason, "crash_loop", loop)
	}
	return backoff, true
}

// Stop stops the package's process, politely then by force, and waits for
// it. It is safe to call more than once.
func (i *Instance) Stop(ctx context.Context) error {
	i.stopOnce.Do(func() {
		i.mu.Lock()
		i.stopping = true
		close(i.stopCh)
		i.mu.Unlock()
		<-i.superDone
		i.mu.Lock()
		p := i.cur
		i.cur = nil
		i.mu.Unlock()
		if p != nil {
			i.stopErr = p.stop(ctx)
		}
		i.mu.Lock()
		i.state = StateStopped
		i.mu.Unlock()
		i.stderr.Close()
		i.log.Info("package stopped")
	})
	return i.stopErr
}

// stop asks the process to shut down, closes its stdin, then signals its
// group: SIGTERM after the stop timeout, SIGKILL after as long again. It
// returns once the process has been reaped.
func (p *proc) stop(ctx context.Context) error {
	timeout := p.inst.rt.opts.StopTimeout
	sctx, cancel := context.WithCancel(ctx)
	_, _ = p.call(sctx, pkg.MethodShutdown, nil, timeout)
	cancel()
	p.wmu.Lock()
	p.stdin.Close()
	p.wmu.Unlock()
	select {
	case <-p.done:
		return nil
	case <-p.inst.rt.after(timeout):
	case <-ctx.Done():
	}
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-p.inst.rt.after(timeout):
	case <-ctx.Done():
	}
	p.kill()
	<-p.done
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.New("pkgproto: package " + p.inst.name + " did not stop in time and was killed")
}
