package config

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-json-experiment/json"
)

// The resolver's error codes. They are stable; docs/config.md lists them.
const (
	SecretInvalidReference = "secret_invalid_reference" // not a valid reference
	SecretNotFound         = "secret_not_found"         // no such variable, key or keyring item
	SecretUnreadable       = "secret_unreadable"        // secrets.json missing or not a JSON object of strings
	SecretUnsafeFile       = "secret_unsafe_file"       // secrets.json group/world-accessible, foreign-owned, a link or not a file
	SecretTimeout          = "secret_timeout"           // cmd: ran past its deadline; its process group was killed
	SecretTooLarge         = "secret_too_large"         // cmd: printed more than 64 KiB, or secrets.json is over 1 MiB
	SecretEmpty            = "secret_empty"             // the secret is empty
	SecretCommandFailed    = "secret_command_failed"    // cmd: could not start, or exited non-zero or by a signal
	SecretCancelled        = "secret_cancelled"         // the caller's context ended first
	KeyringUnavailable     = "keyring_unavailable"      // the platform keyring could not be asked
)

// SecretError is a resolution failure: a stable code and a message that
// says what to do next. Neither ever holds the reference's text, the secret,
// a command's output or a file's content.
type SecretError struct {
	Code    string
	Message string
	cause   error // only a context's error, for errors.Is
}

func (e *SecretError) Error() string { return e.Code + ": " + e.Message }
func (e *SecretError) Unwrap() error { return e.cause }

func secretErr(code, msg string) error { return &SecretError{Code: code, Message: msg} }

// Limits of the resolver.
const (
	// DefaultCommandTimeout bounds a cmd: reference's run.
	DefaultCommandTimeout = 10 * time.Second
	// MaxCommandOutput bounds what a cmd: reference may print: 64 KiB.
	MaxCommandOutput = 64 << 10
	// maxSecretsFile bounds secrets.json.
	maxSecretsFile = 1 << 20
	// SecretsFileName is the file: scheme's file in the state directory.
	SecretsFileName = "secrets.json"
	// defaultPath is a cmd: reference's PATH when the daemon has none.
	defaultPath = "/usr/local/bin:/usr/bin:/bin"
)

// Resolver turns a secret reference into its secret at the moment an
// attempt needs it. It caches nothing: every call reads the source again.
// The zero value uses the platform keyring, the process environment and a
// 10 s command deadline; file: references need StateDir.
type Resolver struct {
	// Keyring answers keyring: references; nil means SystemKeyring.
	Keyring Keyring
	// StateDir holds secrets.json for file: references, and is the working
	// directory of cmd: references ("/" when empty).
	StateDir string
	// LookupEnv reads the daemon's environment for env: references and for
	// a cmd: reference's PATH and HOME; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// CommandTimeout bounds a cmd: reference; zero means 10 s.
	CommandTimeout time.Duration
	// After starts the cmd: deadline; nil means a real timer. Tests inject
	// a channel they fire themselves, so no test waits out a deadline.
	After func(time.Duration) <-chan time.Time
	// Shell runs cmd: references with -c; empty means /bin/sh.
	Shell string
	// Reaper, when set, is the argument list of a program that runs the
	// command as a child subreaper and kills what it leaves behind when
	// it ends or receives SIGTERM (the daemon's `open-conduit reap --`):
	// the shell and its arguments are appended to it. Without it a
	// process the command moved out of its group (setsid) outlives the
	// resolution.
	Reaper []string
}

// Resolve returns the secret a reference names. Its errors are
// *SecretError values with a stable code.
func (r *Resolver) Resolve(ctx context.Context, ref string) (string, error) {
	parsed, err := ParseSecretRef(ref)
	if err != nil {
		return "", err
	}
	return r.ResolveRef(ctx, parsed)
}

// ResolveRef is Resolve on a parsed reference, such as Snapshot.Secret
// returns.
func (r *Resolver) ResolveRef(ctx context.Context, ref SecretRef) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", &SecretError{Code: SecretCancelled, Message: "secret resolution was cancelled before it started", cause: err}
	}
	_, body, _ := strings.Cut(ref.text, ":")
	var (
		v   string
		err error
	)
	switch ref.scheme {
	case SchemeEnv:
		v, err = r.env(body)
	case SchemeFile:
		v, err = r.file(body)
	case SchemeKeyring:
		v, err = r.keyring(ctx, body)
	case SchemeCmd:
		v, err = r.command(ctx, body)
	default:
		err = secretErr(SecretInvalidReference, "a secret reference is <scheme>:<rest> with scheme keyring, file, env or cmd")
	}
	if err != nil {
		return "", err
	}
	if v == "" {
		return "", secretErr(SecretEmpty, "the "+string(ref.scheme)+" secret is empty: store a non-empty value")
	}
	return v, nil
}

func (r *Resolver) lookupEnv(name string) (string, bool) {
	if r.LookupEnv != nil {
		return r.LookupEnv(name)
	}
	return os.LookupEnv(name)
}

func (r *Resolver) env(name string) (string, error) {
	v, ok := r.lookupEnv(name)
	if !ok {
		return "", secretErr(SecretNotFound, "the environment variable the env reference names is not set in the daemon's environment: set it before starting the daemon")
	}
	return v, nil
}

func (r *Resolver) file(key string) (string, error) {
	if r.StateDir == "" {
		return "", secretErr(SecretUnreadable, "file references need the daemon's state directory, and none is set")
	}
	path := filepath.Join(r.StateDir, SecretsFileName)
	// O_NOFOLLOW refuses a link; O_NONBLOCK keeps a FIFO from blocking the
	// open, and the mode check below refuses it.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", secretErr(SecretUnreadable, "the state directory has no secrets.json: create it owner-only (mode 0600) holding a JSON object of key to secret")
	case errors.Is(err, syscall.ELOOP):
		return "", secretErr(SecretUnsafeFile, "secrets.json in the state directory is a symbolic link: replace it with the file itself, owner-only (mode 0600)")
	case err != nil:
		return "", secretErr(SecretUnreadable, "secrets.json in the state directory cannot be opened: check that the daemon's user owns it and may read it")
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", secretErr(SecretUnreadable, "secrets.json in the state directory cannot be examined: check the file")
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular():
		return "", secretErr(SecretUnsafeFile, "secrets.json in the state directory is not a regular file: replace it with one, owner-only (mode 0600)")
	case !ok || st.Uid != uint32(os.Getuid()):
		return "", secretErr(SecretUnsafeFile, "secrets.json is owned by another user: chown it to the daemon's user and chmod 600 it")
	case fi.Mode().Perm()&0o077 != 0:
		return "", secretErr(SecretUnsafeFile, "secrets.json is accessible to group or others: chmod 600 it")
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSecretsFile+1))
	if err != nil {
		return "", secretErr(SecretUnreadable, "secrets.json in the state directory cannot be read: check the file")
	}
	if len(data) > maxSecretsFile {
		return "", secretErr(SecretTooLarge, "secrets.json is larger than 1 MiB: keep only secrets in it")
	}
	var m map[string]string
	if err := json.Unmarshal(data, &m); err != nil || m == nil {
		return "", secretErr(SecretUnreadable, "secrets.json is not a JSON object of key to string (with no repeated key): fix the file")
	}
	v, ok := m[key]
	if !ok {
		return "", secretErr(SecretNotFound, "secrets.json has no entry for the file reference's key: add it")
	}
	return v, nil
}

func (r *Resolver) keyring(ctx context.Context, body string) (string, error) {
	service, user, _ := strings.Cut(body, "/")
	kr := r.Keyring
	if kr == nil {
		kr = SystemKeyring{}
	}
	type answer struct {
		v   string
		err error
	}
	// The platform keyring takes no context; the answer is awaited only as
	// long as the caller waits.
	ch := make(chan answer, 1)
	go func() {
		v, err := kr.Get(service, user)
		ch <- answer{v, err}
	}()
	select {
	case a := <-ch:
		switch {
		case errors.Is(a.err, ErrKeyringNotFound):
			return "", secretErr(SecretNotFound, "the keyring has no item for the keyring reference's service and user: store it with the platform's keyring tool")
		case a.err != nil:
			return "", secretErr(KeyringUnavailable, "the platform keyring could not be asked: check that its service runs for the daemon's user (on Linux, the Secret Service over D-Bus)")
		}
		return a.v, nil
	case <-ctx.Done():
		return "", &SecretError{Code: SecretCancelled, Message: "secret resolution was cancelled while the keyring was asked", cause: ctx.Err()}
	}
}

func (r *Resolver) commandTimeout() time.Duration {
	if r.CommandTimeout <= 0 {
		return DefaultCommandTimeout
	}
	return r.CommandTimeout
}

// deadline starts the cmd: deadline and returns its channel and a stop
// function.
func (r *Resolver) deadline(d time.Duration) (<-chan time.Time, func()) {
	if r.After != nil {
		return r.After(d), func() {}
	}
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }
}

func (r *Resolver) command(ctx context.Context, text string) (string, error) {
	timeout := r.commandTimeout()
	shell := r.Shell
	if shell == "" {
		shell = "/bin/sh"
	}
	dir := r.StateDir
	if dir == "" {
		dir = "/"
	}
	path, ok := r.lookupEnv("PATH")
	if !ok || path == "" {
		path = defaultPath
	}
	env := []string{"PATH=" + path}
	if home, ok := r.lookupEnv("HOME"); ok && home != "" {
		env = append(env, "HOME="+home)
	}

	// Standard output is a pipe of our own rather than StdoutPipe, so that
	// Wait returns when the shell ends even while something it left behind
	// still holds the pipe's write end.
	pr, pw, err := os.Pipe()
	if err != nil {
		return "", secretErr(SecretCommandFailed, "the cmd reference's command could not be started")
	}
	defer pr.Close()
	argv := append(append([]string(nil), r.Reaper...), shell, "-c", text)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.Stdin = nil  // /dev/null
	cmd.Stderr = nil // discarded
	cmd.Stdout = pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	pw.Close() // the command holds its own copy
	if err != nil {
		return "", secretErr(SecretCommandFailed, "the cmd reference's command could not be started: check that /bin/sh exists")
	}
	pgid := cmd.Process.Pid
	killGroup := func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) }
	if len(r.Reaper) > 0 {
		// The reaper kills the command's group and everything that left
		// it, then exits; killing the reaper itself would orphan them.
		killGroup = func() { _ = syscall.Kill(pgid, syscall.SIGTERM) }
	}

	var (
		buf      bytes.Buffer
		readErr  error
		tooLarge bool
	)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		_, readErr = io.Copy(&buf, io.LimitReader(pr, MaxCommandOutput+1))
		if buf.Len() > MaxCommandOutput {
			tooLarge = true
			killGroup()
		}
	}()

	deadline, stopTimer := r.deadline(timeout)
	defer stopTimer()
	var timedOut atomic.Bool
	stopped := make(chan struct{})
	watcherDone := make(chan struct{})
	go func() {
		defer close(watcherDone)
		select {
		case <-deadline:
			timedOut.Store(true)
		case <-ctx.Done():
		case <-stopped:
			return
		}
		// The whole group: a shell that ignores SIGTERM, and anything it
		// started, ends here. The read deadline also frees the read from a
		// process that left the group but kept the pipe.
		killGroup()
		_ = pr.SetReadDeadline(time.Now())
	}()

	waitErr := cmd.Wait()
	// Whatever the command left behind in its group goes with it, so the
	// pipe reaches its end once the command has (a reaper has already
	// killed all it left, and exited).
	if len(r.Reaper) == 0 {
		killGroup()
	}
	<-readDone
	close(stopped)
	<-watcherDone

	switch {
	case ctx.Err() != nil:
		return "", &SecretError{Code: SecretCancelled, Message: "secret resolution was cancelled while the cmd reference's command ran; its process group was killed", cause: ctx.Err()}
	case timedOut.Load():
		return "", secretErr(SecretTimeout, fmt.Sprintf("the cmd reference's command did not finish within %s and its process group was killed: make it finish sooner", timeout))
	case tooLarge:
		return "", secretErr(SecretTooLarge, "the cmd reference's command printed more than 64 KiB: print only the secret")
	case readErr != nil:
		return "", secretErr(SecretCommandFailed, "the cmd reference's command output could not be read")
	case waitErr != nil:
		var ee *exec.ExitError
		if errors.As(waitErr, &ee) && ee.ExitCode() >= 0 {
			return "", secretErr(SecretCommandFailed, fmt.Sprintf("the cmd reference's command exited with status %d: run it by hand as the daemon's user to see why", ee.ExitCode()))
		}
		return "", secretErr(SecretCommandFailed, "the cmd reference's command was ended by a signal: run it by hand as the daemon's user to see why")
	}
	s := buf.String()
	if t, ok := strings.CutSuffix(s, "\r\n"); ok {
		s = t
	} else if t, ok := strings.CutSuffix(s, "\n"); ok {
		s = t
	}
	return s, nil
}
