package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/internal/executor"
)

// Package is the distribution package that provides bwrap.
const Package = "bubblewrap"

// Fixed paths inside a sandbox.
const (
	// Root holds everything the host mounts for the execution.
	Root = "/run/open-conduit"
	// RunDir is the execution's run directory (read-only): its toolbelt
	// socket, its token/ directory and its egress socket. The directory is
	// mounted, not the files, so that a rotated token (replaced by rename)
	// and a socket a restarted daemon binds again both appear.
	RunDir = Root + "/run"
	// SocketDir holds the toolbelt socket when the host had to bind it at
	// its short-path fallback outside the run directory.
	SocketDir = Root + "/socket"
	// Endpoint and TokenFile are OS_ENDPOINT and OS_TOKEN_FILE inside.
	Endpoint  = RunDir + "/toolbelt.sock"
	TokenFile = RunDir + "/token/token"
	// EgressSocket is the daemon's egress proxy for the execution, beside
	// the toolbelt socket (in SocketDir when that is where the toolbelt
	// socket is).
	EgressSocketName = "egress.sock"
	EgressSocket     = RunDir + "/" + EgressSocketName
	// BinDir holds the os binary (read-only); it is first on PATH.
	BinDir = Root + "/bin"
	// PlaybookDir holds the playbooks (read-only).
	PlaybookDir = Root + "/playbooks"
	// InitProgram is a link to the os binary under a name that is not
	// "os", so that it runs as open-conduit: `sandbox-init`.
	InitProgram = Root + "/init"
	// ProxyAddr is where the bridge listens in the sandbox's own network
	// namespace, and ProxyURL the proxy variables' value.
	ProxyAddr = "127.0.0.1:3128"
	ProxyURL  = "http://" + ProxyAddr
)

// InitCommand is the hidden subcommand of the open-conduit binary that runs
// first inside the sandbox (Init).
const InitCommand = "sandbox-init"

// probeTimeout bounds the one bwrap run that checks the machine.
const probeTimeout = 30 * time.Second

// Runtime finds bwrap and checks once that it can create the sandbox's
// namespaces on this machine. It is safe for concurrent use.
type Runtime struct {
	// Program is bwrap's path; "" looks "bwrap" up on the daemon's PATH.
	Program string

	mu sync.Mutex
	// ok is bwrap's path once a probe succeeded; a failed probe is tried
	// again on the next Check, so installing bwrap needs no restart.
	ok string
}

// Check returns bwrap's path, or an *executor.UnavailableError saying what
// to install or fix when bwrap is missing or cannot create namespaces.
func (r *Runtime) Check() (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ok != "" {
		return r.ok, nil
	}
	prog := r.Program
	if prog == "" {
		p, err := exec.LookPath("bwrap")
		if err != nil {
			return "", unavailable("bwrap was not found on the daemon's PATH: install the " + Package + " package (apt-get install " + Package + ") and retry the Work")
		}
		prog = p
	}
	if err := probe(prog); err != nil {
		return "", err
	}
	r.ok = prog
	return prog, nil
}

func unavailable(detail string) error {
	return &executor.UnavailableError{Reason: executor.ReasonSandboxUnavailable, Detail: detail}
}

// probe runs bwrap itself (its --version) inside the namespaces and mounts
// a sandbox uses.
func probe(prog string) error {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--cap-drop", "ALL", "--die-with-parent",
		"--", prog, "--version")
	cmd.Env = []string{}
	if err := cmd.Run(); err != nil {
		return unavailable("bwrap cannot create the sandbox's namespaces on this machine (user namespaces may be disabled, or a container forbids them): see the sandbox documentation, install the " + Package + " package, and retry the Work")
	}
	return nil
}

// Spec is one launch to sandbox. Host paths are absolute.
type Spec struct {
	// Program is bwrap's path (Runtime.Check).
	Program string
	// OS is the host's os binary (<state>/bin/os), which is also the
	// open-conduit binary; its directory is mounted at BinDir.
	OS string
	// Endpoint and TokenFile are the host's toolbelt socket and token file
	// ("" for an execution without a toolbelt). The token file is
	// <run dir>/token/token; the run directory is mounted at RunDir.
	Endpoint, TokenFile string
	// Playbooks is the host's playbook directory ("" for none).
	Playbooks string
	// ReadOnly are further paths mounted read-only at their own paths
	// (Config.ReadOnly).
	ReadOnly []string
	// Writable are directories mounted read-write at their own paths (the
	// workspace, an agent's home).
	Writable []string
	// Dir is the working directory, at its own path (inside a Writable).
	Dir string
	// Argv is the command.
	Argv []string
}

// Inside is what the command is told about the toolbelt inside the
// sandbox.
type Inside struct {
	Endpoint, TokenFile, BinDir, PlaybookDir string
}

// The system's read-only part: these directories (or, where the host has
// them as symlinks, such as /bin -> usr/bin, the same symlinks).
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt"}

// etcAllow is what of /etc a sandbox sees: what programs need to start,
// resolve users and hosts, and check TLS certificates. Whatever else /etc
// holds (shadow files, SSH host keys, sudoers, the machine's own
// credentials and proxies) is not mounted.
var etcAllow = []string{
	"alternatives", "bash.bashrc", "ca-certificates", "ca-certificates.conf", "crypto-policies",
	"gai.conf", "group", "host.conf", "hostname", "hosts", "inputrc", "ld.so.cache", "ld.so.conf",
	"ld.so.conf.d", "localtime", "mime.types", "nsswitch.conf", "os-release", "passwd", "pki",
	"profile", "protocols", "services", "ssl", "terminfo", "timezone",
}

// etcMask are directories inside the allowed part that hold private keys:
// each gets an empty tmpfs over it.
var etcMask = []string{"/etc/ssl/private", "/etc/pki/tls/private"}

// Wrap returns the bwrap command line that runs s.Argv sandboxed (under
// `sandbox-init`, which bridges the egress socket), and what the command is
// to be told inside. The environment the launch gives bwrap passes through
// to the command; nothing secret is on this command line.
func Wrap(s Spec) ([]string, Inside, error) {
	var in Inside
	if s.Program == "" || s.OS == "" || len(s.Argv) == 0 || s.Dir == "" {
		return nil, in, errors.New("sandbox: the launch names no bwrap, os binary, working directory or command")
	}
	a := []string{s.Program,
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net",
		"--die-with-parent", "--cap-drop", "ALL", "--hostname", "sandbox",
	}
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(d)
			if err == nil {
				a = append(a, "--symlink", target, d)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", d, d)
		}
	}
	for _, name := range etcAllow {
		a = append(a, "--ro-bind-try", "/etc/"+name, "/etc/"+name)
	}
	for _, d := range etcMask {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			a = append(a, "--tmpfs", d)
		}
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp", "--tmpfs", "/run",
		"--dir", Root,
		"--ro-bind", filepath.Dir(s.OS), BinDir,
		"--symlink", BinDir+"/"+filepath.Base(s.OS), InitProgram)
	in.BinDir = BinDir
	if s.TokenFile != "" {
		run := filepath.Dir(filepath.Dir(s.TokenFile))
		if filepath.Base(filepath.Dir(s.TokenFile)) != "token" {
			return nil, in, errors.New("sandbox: the token file is not in its run directory's token/ directory")
		}
		a = append(a, "--ro-bind", run, RunDir)
		in.TokenFile = TokenFile
		if s.Endpoint != "" {
			if filepath.Dir(s.Endpoint) == run {
				in.Endpoint = RunDir + "/" + filepath.Base(s.Endpoint)
			} else {
				a = append(a, "--ro-bind", filepath.Dir(s.Endpoint), SocketDir)
				in.Endpoint = SocketDir + "/" + filepath.Base(s.Endpoint)
			}
		}
	}
	if s.Playbooks != "" {
		a = append(a, "--ro-bind-try", s.Playbooks, PlaybookDir)
		in.PlaybookDir = PlaybookDir
	}
	for _, d := range s.ReadOnly {
		if !filepath.IsAbs(d) {
			return nil, in, fmt.Errorf("sandbox: a read-only path is not absolute")
		}
		a = append(a, "--ro-bind", d, d)
	}
	for _, d := range s.Writable {
		if !filepath.IsAbs(d) {
			return nil, in, fmt.Errorf("sandbox: a writable directory is not absolute")
		}
		a = append(a, "--bind", d, d)
	}
	// The root bwrap builds (a tmpfs holding /etc's mount points) is made
	// read-only last, so that only the writable mounts and the private
	// /tmp, /var/tmp and /run can be written.
	a = append(a, "--remount-ro", "/", "--chdir", s.Dir, "--", InitProgram, InitCommand)
	if s.TokenFile != "" {
		// The egress socket lies beside the toolbelt socket, in the run
		// directory or at its short-path fallback.
		bridge := EgressSocket
		if in.Endpoint != "" {
			bridge = path.Join(path.Dir(in.Endpoint), EgressSocketName)
		}
		a = append(a, "--bridge", bridge)
	}
	a = append(a, "--")
	return append(a, s.Argv...), in, nil
}

// WithEnv returns env ("KEY=value") with set's variables in place of any
// of the same name, sorted: a sandboxed command's environment with what the
// sandbox decides (ProxyEnv, HOME) winning over what it was given.
func WithEnv(env []string, set map[string]string) []string {
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if _, ok := set[name]; !ok {
			out = append(out, kv)
		}
	}
	for name, v := range set {
		out = append(out, name+"="+v)
	}
	slices.Sort(out)
	return out
}

// ProxyEnv are the variables that send a sandboxed command's HTTP(S)
// through the bridge: the proxy for every scheme, and no host exempt.
func ProxyEnv() map[string]string {
	return map[string]string{
		"HTTPS_PROXY": ProxyURL, "https_proxy": ProxyURL,
		"HTTP_PROXY": ProxyURL, "http_proxy": ProxyURL,
		"ALL_PROXY": ProxyURL, "all_proxy": ProxyURL,
		"NO_PROXY": "", "no_proxy": "",
	}
}
