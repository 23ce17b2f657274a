package sandbox

import (
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
)

// forwarded are the signals Init passes on to the command's process group.
var forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// Init is the body of `open-conduit sandbox-init [--bridge SOCKET] --
// ARGV...`, the first program inside a sandbox. With a bridge it listens
// on ProxyAddr (the sandbox's own loopback) and forwards each connection
// byte for byte to the Unix socket, dialled afresh for each one (so a
// socket a restarted daemon binds again is reached). It then runs argv as
// its child in a process group of its own, passes on the signals it gets
// (the executor's polite stop reaches Init through the supervisor's group,
// and reaches the command only through Init, exactly once), and returns
// the command's exit status, 128+N when signal N ended it.
func Init(bridge string, argv []string) (int, error) {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	if len(argv) == 0 {
		return 2, errors.New("name the command to run after --")
	}
	if bridge != "" {
		ln, err := net.Listen("tcp", ProxyAddr)
		if err != nil {
			return 125, errors.New("cannot listen on the sandbox's proxy address " + ProxyAddr)
		}
		defer ln.Close()
		go Bridge(ln, bridge)
	}
	path, err := exec.LookPath(argv[0])
	if errors.Is(err, exec.ErrDot) {
		err = nil
	}
	if err != nil {
		return 127, errors.New("cannot start the command: the program was not found on PATH inside the sandbox")
	}
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return 126, errors.New("cannot start the command inside the sandbox")
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				syscall.Kill(-cmd.Process.Pid, s.(syscall.Signal))
			case <-done:
				return
			}
		}
	}()
	err = cmd.Wait()
	close(done)
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ok && ws.Signaled():
		return 128 + int(ws.Signal()), nil
	case ok:
		return ws.ExitStatus(), nil
	case err != nil:
		return 1, errors.New("lost track of the command inside the sandbox")
	}
	return 0, nil
}

// Bridge accepts connections on ln until it is closed and forwards each to
// the Unix socket at path, both ways, closing each side's write half when
// the other side's reading ends. A connection whose socket cannot be
// dialled is closed at once.
func Bridge(ln net.Listener, path string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		go forward(c, path)
	}
}

func forward(c net.Conn, path string) {
	defer c.Close()
	u, err := net.Dial("unix", path)
	if err != nil {
		return
	}
	defer u.Close()
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
	}
	go pipe(u, c)
	go pipe(c, u)
	wg.Wait()
}
