package pkgproto_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/packages"
	"github.com/open-conduit/open-conduit/internal/packages/pkgproto"
	"github.com/open-conduit/open-conduit/internal/reaper"
)

// TestMain doubles as a subreaper (the daemon's `open-conduit reap`) for
// the packages started under Options.Wrap, and as a daemon that starts the
// Python package and waits to be killed, for
// TestKilledDaemonLeavesNoPackage.
func TestMain(m *testing.M) {
	switch {
	case os.Getenv("PKGPROTO_TEST_REAP") == "1":
		code, err := reaper.Run(os.Args[1:])
		if err != nil {
			fmt.Fprintln(os.Stderr, "reap:", err)
		}
		os.Exit(code)
	case os.Getenv("PKGPROTO_TEST_DAEMON") == "1":
		os.Exit(fakeDaemon())
	}
	os.Exit(m.Run())
}

// wrapped has ins run under the test binary as its subreaper.
func wrapped(ins packages.Installed, opts pkgproto.Options) (packages.Installed, pkgproto.Options) {
	env := map[string]string{"PKGPROTO_TEST_REAP": "1"}
	for k, v := range ins.Manifest.Run.Env {
		env[k] = v
	}
	ins.Manifest.Run.Env = env
	opts.Wrap = []string{os.Args[0]}
	return ins, opts
}

// packagePID asks the Python package for its own process id.
func packagePID(inst packages.Instance) (int, error) {
	out, err := inst.Registration().Operations[0].Handler(context.Background(), extension.Authority{Config: json.RawMessage(`{}`)}, json.RawMessage(`{"text":"pid"}`))
	if err != nil {
		return 0, err
	}
	var got struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal(out, &got); err != nil || got.PID <= 0 {
		return 0, fmt.Errorf("no pid in %s", out)
	}
	return got.PID, nil
}

func fakeDaemon() int {
	ins, err := pyechoAt(os.Getenv("PKGPROTO_TEST_PKG"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// A stubborn package ignores the end of its stdin and SIGTERM: only
	// the parent-death signal, or its subreaper, ends it.
	ins.Manifest.Run.Env = map[string]string{"PYECHO_STUBBORN": "1"}
	var opts pkgproto.Options
	if os.Getenv("PKGPROTO_TEST_WRAP") == "1" {
		ins, opts = wrapped(ins, opts)
	}
	inst, err := pkgproto.NewRuntime(opts).Start(context.Background(), ins)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pid, err := packagePID(inst)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(pid)
	select {}
}

// gone reports whether pid has ended (a zombie waiting for its reaper has).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return os.IsNotExist(err)
	}
	// The state follows the command's closing parenthesis.
	s := string(stat)
	if k := strings.LastIndexByte(s, ')'); k >= 0 && len(s) > k+2 {
		return s[k+2] == 'Z'
	}
	return false
}

// A daemon killed by SIGKILL leaves no package process behind, even one
// that ignores the end of its input and SIGTERM: the kernel delivers the
// parent-death signal to the package, or to the subreaper it runs under,
// which kills it.
func TestKilledDaemonLeavesNoPackage(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal and the subreaper are Linux's")
	}
	needPython(t)
	for name, wrap := range map[string]string{"plain": "0", "under a subreaper": "1"} {
		t.Run(name, func(t *testing.T) {
			ins := pyecho(t)
			daemon := exec.Command(os.Args[0], "-test.run=^$")
			daemon.Env = append(os.Environ(), "PKGPROTO_TEST_DAEMON=1", "PKGPROTO_TEST_PKG="+ins.Dir, "PKGPROTO_TEST_WRAP="+wrap)
			daemon.Stderr = os.Stderr
			out, err := daemon.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := daemon.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil {
				_ = daemon.Process.Kill()
				_ = daemon.Wait()
				t.Fatalf("the daemon said nothing: %v", err)
			}
			pid, err := strconv.Atoi(strings.TrimSpace(line))
			if err != nil || pid <= 0 || gone(pid) {
				_ = daemon.Process.Kill()
				_ = daemon.Wait()
				t.Fatalf("no package process: %q", line)
			}
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
			if err := daemon.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = daemon.Wait()
			eventually(t, "the package process to end with its daemon", func() bool { return gone(pid) })
		})
	}
}

// Under a subreaper the package is stopped as well: shutdown ends it, and
// its subreaper with it.
func TestStopUnderASubreaper(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the subreaper is Linux's")
	}
	needPython(t)
	ins, opts := wrapped(pyecho(t), pkgproto.Options{})
	inst, err := pkgproto.NewRuntime(opts).Start(context.Background(), ins)
	if err != nil {
		t.Fatal(err)
	}
	reaperPID := inst.(*pkgproto.Instance).PID()
	pid, err := packagePID(inst)
	if err != nil {
		t.Fatal(err)
	}
	if pid == reaperPID {
		t.Fatal("the package is not under its subreaper")
	}
	if err := inst.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, p := range []int{pid, reaperPID} {
		if !gone(p) {
			t.Fatalf("process %d is still there", p)
		}
	}
}
