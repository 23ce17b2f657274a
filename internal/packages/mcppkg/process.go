package mcppkg

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// process is one run of the server: a child in a process group of its own
// (its pid is the group's id), killed by the kernel if the daemon dies
// (Pdeathsig), with its stdin and stdout as the MCP stdio transport.
type process struct {
	cmd    *exec.Cmd
	stdin  *os.File // the host's end of the server's stdin
	stdout *os.File // the host's end of the server's stdout
	exited chan struct{}
	state  *os.ProcessState // set before exited is closed
}

// command resolves the manifest's argument vector: a first element with a
// slash is a path inside the package directory, otherwise a program on the
// daemon's PATH.
func command(dir string, argv []string) (string, []string, error) {
	if len(argv) == 0 || argv[0] == "" {
		return "", nil, errors.New("mcppkg: the manifest's run.command is empty")
	}
	name := argv[0]
	if strings.Contains(name, "/") {
		rel := filepath.Clean(name)
		if !filepath.IsLocal(rel) {
			return "", nil, errors.New("mcppkg: the manifest's run.command names a path outside the package directory")
		}
		return filepath.Join(dir, rel), argv[1:], nil
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", nil, errors.New("mcppkg: the manifest's run.command names a program that is not on the daemon's PATH")
	}
	return path, argv[1:], nil
}

// startProcess starts the server with its stdin and stdout on pipes whose
// other ends the host keeps, and its stderr on stderr (never read into an
// error).
func startProcess(dir, path string, args, env []string, stderr io.Writer) (*process, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, stderr
	// Its own group, so that stopping it stops what it started; and
	// killed when the daemon dies, so that a kill -9 of the daemon leaves
	// no server behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &process{cmd: cmd, stdin: inW, stdout: outR, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// Linux sends Pdeathsig when the thread that forked the child
		// ends, not the process: the thread is held for the child's life
		// (so the runtime never ends it under the server), and given
		// back once the child has been reaped.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		p.state = cmd.ProcessState
		close(p.exited)
	}()
	err = <-started
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, &StartError{}
	}
	return p, nil
}

// signal sends sig to the server's whole process group. A group that is
// gone already is no error.
func (p *process) signal(sig syscall.Signal) {
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// stop stops the server politely, then by force: its stdin is closed (an
// MCP server over stdio exits at the end of its input), then after grace
// its group is sent SIGTERM, then after grace again SIGKILL; force skips
// the waits. Whatever is left of the group when the server has gone is
// killed too. It returns once the server has been reaped.
func (p *process) stop(grace time.Duration, after func(time.Duration) <-chan time.Time, force <-chan struct{}) {
	p.stdin.Close()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		select {
		case <-p.exited:
		case <-after(grace):
			p.signal(sig)
		case <-force:
			p.signal(syscall.SIGKILL)
		}
	}
	<-p.exited
	p.signal(syscall.SIGKILL)
	p.stdout.Close()
}

// kill kills the server's group at once and waits for it.
func (p *process) kill() {
	p.stdin.Close()
	p.signal(syscall.SIGKILL)
	<-p.exited
	p.stdout.Close()
}

// exitSentence says, in the host's own words, how the server ended.
func exitSentence(st *os.ProcessState) string {
	if st == nil {
		return "the MCP server ended"
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("the MCP server was killed by signal %d", int(ws.Signal()))
	}
	return fmt.Sprintf("the MCP server exited with status %d", st.ExitCode())
}

// StartError is a server that could not be started, initialized or
// listed. Its text is the host's own: never the server's output.
type StartError struct {
	// Step is what failed: "start", "initialize" or "list tools".
	Step string
}

func (e *StartError) Error() string {
	if e.Step == "" || e.Step == "start" {
		return "mcppkg: the MCP server's command could not be started"
	}
	return "mcppkg: the MCP server did not answer " + e.Step
}
