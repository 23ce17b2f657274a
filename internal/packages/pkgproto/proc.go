package pkgproto

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/extension/pkg"
	"github.com/open-conduit/open-conduit/internal/packages"
)

// proc is one run of a package's process and the JSON-RPC client over its
// stdin and stdout.
type proc struct {
	inst *Instance
	cmd  *exec.Cmd
	pgid int

	wmu   sync.Mutex
	stdin *os.File

	mu      sync.Mutex
	next    int64
	pending map[int64]chan pkg.Message
	dead    bool
	// exit is a safe sentence saying how the process ended.
	exit string

	serves map[string]bool
	// done is closed once the process has exited and been reaped.
	done chan struct{}
}

// spawn starts the package's process and shakes hands with it.
func (i *Instance) spawn(ctx context.Context) (*proc, error) {
	p, err := i.startProcess()
	if err != nil {
		return nil, err
	}
	if err := p.handshake(ctx); err != nil {
		p.kill()
		<-p.done
		return nil, err
	}
	return p, nil
}

func (i *Instance) startProcess() (*proc, error) {
	m := i.pkg.Manifest
	if len(m.Run.Command) == 0 {
		return nil, &StartError{Package: i.name, Reason: "its manifest has no run.command"}
	}
	path := m.Run.Command[0]
	if strings.Contains(path, "/") {
		if !filepath.IsAbs(path) {
			path = filepath.Join(i.pkg.Dir, path)
		}
	} else {
		found, err := exec.LookPath(path)
		if err != nil {
			return nil, &StartError{Package: i.name, Reason: fmt.Sprintf("its command %s is not on the daemon's PATH", path), Err: err}
		}
		path = found
	}
	argv := append(slices.Clone(i.rt.opts.Wrap), path)
	argv = append(argv, m.Run.Command[1:]...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = i.pkg.Dir
	cmd.Env = i.environ()
	cmd.SysProcAttr = sysProcAttr(len(i.rt.opts.Wrap) > 0)

	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, &StartError{Package: i.name, Reason: "no pipe for its stdin", Err: err}
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, &StartError{Package: i.name, Reason: "no pipe for its stdout", Err: err}
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, &StartError{Package: i.name, Reason: "no pipe for its stderr", Err: err}
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW

	p := &proc{inst: i, cmd: cmd, stdin: inW, pending: map[int64]chan pkg.Message{}, done: make(chan struct{})}
	started := make(chan error, 1)
	readerDone := make(chan struct{})
	stderrDone := make(chan struct{})
	go func() {
		// The parent-death signal follows the thread that started the
		// process: keep this goroutine on it for the process's life.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		p.pgid = cmd.Process.Pid
		started <- nil
		werr := cmd.Wait()
		// Whatever it left in its group goes with it.
		_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
		// Its answers written before it ended are still read.
		select {
		case <-readerDone:
		case <-i.rt.after(i.rt.opts.StopTimeout):
		}
		outR.Close()
		<-readerDone
		select {
		case <-stderrDone:
		case <-i.rt.after(i.rt.opts.StopTimeout):
		}
		errR.Close()
		<-stderrDone
		p.exited(describeExit(werr))
	}()
	err = <-started
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, &StartError{Package: i.name, Reason: "its command did not start", Err: err}
	}
	go func() {
		defer close(stderrDone)
		_, _ = bufio.NewReader(errR).WriteTo(i.stderr)
	}()
	go func() {
		defer close(readerDone)
		p.read(outR)
	}()
	return p, nil
}

func (i *Instance) environ() []string {
	env := packages.ProcessEnv(i.rt.opts.Environ(), i.pkg.Manifest.Run)
	return append(env, "OPEN_CONDUIT_PACKAGE="+i.name, "OPEN_CONDUIT_PROTOCOL="+strings.Join(ProtocolVersions, ","))
}

// describeExit says how a process ended, without its output.
func describeExit(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "the process was killed by signal " + strconv.Itoa(int(ws.Signal()))
		}
		return "the process exited with status " + strconv.Itoa(ee.ExitCode())
	}
	if err != nil {
		return "the process could not be waited for"
	}
	return "the process exited with status 0"
}

// read reads the package's messages until its stdout closes.
func (p *proc) read(r *os.File) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := pkg.ReadLine(br)
		if len(bytes.TrimSpace(line)) > 0 {
			if !p.deliver(line) {
				p.violation("a line that is not a JSON-RPC message")
				return
			}
		}
		if errors.Is(err, pkg.ErrTooLong) {
			p.violation("a message longer than the protocol allows")
			return
		}
		if err != nil {
			return
		}
	}
}

// violation kills a process that broke the framing; the supervisor
// restarts it.
func (p *proc) violation(what string) {
	p.inst.log.Warn("package broke the protocol; its process is killed and restarted", "package", p.inst.name, "violation", what)
	p.mu.Lock()
	p.exit = "it broke the protocol: " + what
	p.mu.Unlock()
	p.kill()
}

// deliver hands a response to its caller; it reports false for a line
// that is not a message.
func (p *proc) deliver(line []byte) bool {
	var m pkg.Message
	if err := json.Unmarshal(line, &m); err != nil || m.JSONRPC != "2.0" {
		return false
	}
	if m.Method != "" {
		if len(m.ID) > 0 && string(m.ID) != "null" {
			// The package asks the host nothing in this version.
			_ = p.write(pkg.Message{JSONRPC: "2.0", ID: m.ID, Error: &pkg.ErrorObject{Code: pkg.CodeMethodNotFound, Message: "method not found"}})
		}
		return true
	}
	id, err := strconv.ParseInt(string(m.ID), 10, 64)
	if err != nil {
		// A response to no request of ours (an error about a line it
		// could not read has a null id): nothing waits for it.
		return true
	}
	p.mu.Lock()
	ch, ok := p.pending[id]
	delete(p.pending, id)
	p.mu.Unlock()
	if ok {
		ch <- m
	}
	return true
}

// exited records how the process ended and fails the calls in flight.
func (p *proc) exited(desc string) {
	p.mu.Lock()
	p.dead = true
	if p.exit == "" {
		p.exit = desc
	}
	p.pending = map[int64]chan pkg.Message{}
	p.mu.Unlock()
	p.stdin.Close()
	close(p.done)
}

func (p *proc) exitDesc() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit
}

func (p *proc) kill() {
	if p.pgid > 0 {
		_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
	}
}

func (p *proc) signal(sig syscall.Signal) {
	if p.pgid > 0 {
		_ = syscall.Kill(-p.pgid, sig)
	}
}

func (p *proc) write(m pkg.Message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	p.wmu.Lock()
	defer p.wmu.Unlock()
	_, err = p.stdin.Write(b)
	return err
}

// call sends one request and waits for its answer, the process's end,
// ctx's end or the timeout (none when zero). A JSON-RPC error is an
// *extension.OperationError for an operation error, a *RemoteError
// otherwise.
func (p *proc) call(ctx context.Context, method string, params any, timeout time.Duration) (json.RawMessage, error) {
	name := p.inst.name
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	ch := make(chan pkg.Message, 1)
	p.mu.Lock()
	if p.dead {
		p.mu.Unlock()
		return nil, &UnavailableError{Package: name, Method: method, Reason: "its process is not running"}
	}
	p.next++
	id := p.next
	p.pending[id] = ch
	p.mu.Unlock()
	forget := func() {
		p.mu.Lock()
		delete(p.pending, id)
		p.mu.Unlock()
	}
	if method == pkg.MethodShutdown {
		raw = nil
	}
	if err := p.write(pkg.Message{JSONRPC: "2.0", ID: json.RawMessage(strconv.FormatInt(id, 10)), Method: method, Params: raw}); err != nil {
		forget()
		return nil, &UnavailableError{Package: name, Method: method, Reason: "its stdin is closed"}
	}
	var timer <-chan time.Time
	if timeout > 0 {
		timer = p.inst.rt.after(timeout)
	}
	var m pkg.Message
	select {
	case m = <-ch:
	case <-p.done:
		select {
		case m = <-ch:
		default:
			return nil, &UnavailableError{Package: name, Method: method, Reason: "its process ended during the call (" + p.exitDesc() + ")"}
		}
	case <-ctx.Done():
		forget()
		p.cancel(id)
		return nil, ctx.Err()
	case <-timer:
		forget()
		p.cancel(id)
		return nil, &TimeoutError{Package: name, Method: method, After: timeout}
	}
	if m.Error != nil {
		if m.Error.Code == pkg.CodeOperationError {
			var d pkg.OperationErrorData
			if err := json.Unmarshal(m.Error.Data, &d); err != nil || d.Code == "" {
				return nil, &ProtocolError{Package: name, Method: method, What: "an operation error without a code"}
			}
			return nil, &extension.OperationError{Code: d.Code, Message: d.Message}
		}
		return nil, &RemoteError{Package: name, Method: method, Code: m.Error.Code}
	}
	if len(m.Result) == 0 {
		return nil, &ProtocolError{Package: name, Method: method, What: "a response with neither result nor error"}
	}
	return m.Result, nil
}

func (p *proc) cancel(id int64) {
	params, _ := json.Marshal(pkg.CancelParams{ID: json.RawMessage(strconv.FormatInt(id, 10))})
	_ = p.write(pkg.Message{JSONRPC: "2.0", Method: pkg.MethodCancel, Params: params})
}

// ProtocolVersions are the versions of the extension protocol the host
// speaks, the newest first.
var ProtocolVersions = []string{pkg.ProtocolVersion}

// handshake sends initialize and checks the answer against the manifest.
func (p *proc) handshake(ctx context.Context) error {
	i := p.inst
	m := i.pkg.Manifest
	raw, err := p.call(ctx, pkg.MethodInitialize, pkg.InitializeParams{
		ProtocolVersions: ProtocolVersions,
		Host:             pkg.Party{Name: "open-conduit", Version: i.rt.opts.HostVersion},
		Package:          pkg.Party{Name: m.Name, Version: m.Version},
	}, i.rt.opts.StartTimeout)
	if err != nil {
		var re *RemoteError
		if errors.As(err, &re) && re.Code == pkg.CodeUnsupportedVersion {
			return &HandshakeError{Package: i.name, Reason: "it speaks none of the protocol versions the host speaks (" + quoteList(ProtocolVersions) + ")"}
		}
		var te *TimeoutError
		if errors.As(err, &te) {
			return &HandshakeError{Package: i.name, Reason: fmt.Sprintf("it did not answer initialize within %s", te.After)}
		}
		var ue *UnavailableError
		if errors.As(err, &ue) {
			return &HandshakeError{Package: i.name, Reason: "its process ended before the handshake (" + p.exitDesc() + ")"}
		}
		return &HandshakeError{Package: i.name, Reason: "initialize failed: " + err.Error()}
	}
	var res pkg.InitializeResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return &HandshakeError{Package: i.name, Reason: "its answer to initialize does not decode"}
	}
	if !slices.Contains(ProtocolVersions, res.ProtocolVersion) {
		return &HandshakeError{Package: i.name, Reason: fmt.Sprintf("it chose protocol version %q, which the host did not offer (%s)", res.ProtocolVersion, quoteList(ProtocolVersions))}
	}
	if res.Package.Name != m.Name || res.Package.Version != m.Version {
		return &HandshakeError{Package: i.name, Reason: fmt.Sprintf("it names another package or version than its manifest's (%s %s)", m.Name, m.Version)}
	}
	p.serves = map[string]bool{}
	for _, s := range res.Serves {
		p.serves[s] = true
	}
	if missing := i.required(p.serves); len(missing) > 0 {
		return &HandshakeError{Package: i.name, Reason: "its manifest needs methods it does not serve: " + quoteList(missing)}
	}
	return nil
}
