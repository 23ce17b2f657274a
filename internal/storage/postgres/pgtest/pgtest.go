// Package pgtest is a test helper: a throwaway PostgreSQL cluster started
// from the machine's PostgreSQL binaries for one test binary. It runs
// initdb into a temporary directory, starts postgres listening only on a
// Unix socket in that directory (no TCP port), hands each test a fresh
// schema of its own, and stops the server and removes the directory when
// the binary's tests end (Main).
//
// As root (development and CI run as root, and initdb refuses it), initdb
// and postgres run as an unprivileged user, postgres (Debian's package
// creates it) or else nobody, on a directory that user owns.
//
// Without PostgreSQL's binaries a test that asks for the cluster skips
// with a message saying how to install them; under CI=true it fails. It
// must never be imported by production code (tests and the bench module's
// benchmark program only), never listen on TCP and never touch a cluster it
// did not start.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Install says how to get the binaries.
const Install = "install PostgreSQL (apt-get install postgresql) to run the PostgreSQL tests"

// Cluster is a running throwaway server.
type Cluster struct {
	dir     string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	schemas atomic.Int64
}

// superuser is the cluster's own superuser (initdb -U), trusted on the
// socket.
const superuser = "conduit"

var (
	shared    *Cluster
	sharedErr error
	once      sync.Once
)

// Main runs the tests of a package and then stops the shared cluster, if
// one was started. Call it from TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int { return Wrap(m).Run() }

// Runner is what a TestMain runs (a *testing.M).
type Runner interface{ Run() int }

// Wrap returns m, which also stops the shared cluster once its tests ran:
// for a TestMain that hands m on (goleak.VerifyTestMain(pgtest.Wrap(m))).
func Wrap(m Runner) Runner { return wrapped{m} }

type wrapped struct{ m Runner }

func (w wrapped) Run() int {
	code := w.m.Run()
	if shared != nil {
		if err := shared.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stop the cluster: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// Require returns the binary's cluster, starting it on first use. It
// skips t when PostgreSQL is not installed (fails it under CI=true), and
// fails t when the cluster does not start.
func Require(t testing.TB) *Cluster {
	t.Helper()
	once.Do(func() { shared, sharedErr = Start() })
	if errors.Is(sharedErr, errNoBinaries) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("pgtest: %v; CI must %s", sharedErr, Install)
		}
		t.Skipf("pgtest: %v; %s", sharedErr, Install)
	}
	if sharedErr != nil {
		t.Fatalf("pgtest: %v", sharedErr)
	}
	return shared
}

var errNoBinaries = errors.New("PostgreSQL's initdb and postgres are not installed")

// BinDir finds the directory of initdb and postgres: pg_config's bindir,
// else the newest /usr/lib/postgresql/*/bin (Debian keeps them off PATH).
func BinDir() (string, error) {
	var dirs []string
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dirs = append(dirs, strings.TrimSpace(string(out)))
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	// Newest major first: the glob sorts lexically, so sort by number.
	for i := range found {
		for j := i + 1; j < len(found); j++ {
			if major(found[j]) > major(found[i]) {
				found[i], found[j] = found[j], found[i]
			}
		}
	}
	dirs = append(dirs, found...)
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", errNoBinaries
}

func major(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExec(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// runAs is the credential initdb and postgres run with: nil when the
// process is not root, else the postgres user's (or nobody's).
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil || uid == 0 {
			continue
		}
		// No supplementary groups: root's are dropped.
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("running as root, and neither a postgres nor a nobody user exists to run initdb and postgres as")
}

func command(cred *syscall.Credential, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = []string{"LC_ALL=C", "LANG=C", "PATH=/usr/bin:/bin", "TZ=UTC"}
	// The server dies with the test binary even if Stop never runs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
	return cmd
}

// Start initialises and starts a cluster in a new temporary directory,
// with durability off (StartWith's zero Options).
func Start() (*Cluster, error) { return StartWith(Options{}) }

// Options change how StartWith runs the server.
type Options struct {
	// Durable keeps PostgreSQL's defaults for durability (fsync,
	// synchronous_commit and full_page_writes on), for a benchmark that
	// must pay what a real server pays. Tests leave it off: nothing of a
	// throwaway cluster needs to survive a crash.
	Durable bool
	// CommitDelay, when positive, makes every commit wait that long
	// before its WAL flush (PostgreSQL's commit_delay with
	// commit_siblings 0): a benchmark's stand-in for a disk whose sync
	// costs that much more. Tests leave it zero.
	CommitDelay time.Duration
	// Statements loads pg_stat_statements, so that a benchmark can count
	// the statements each database ran (CREATE EXTENSION
	// pg_stat_statements in one database to read them). Tests leave it
	// off.
	Statements bool
}

// StartWith is Start with options.
func StartWith(o Options) (*Cluster, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	cred, err := runAs()
	if err != nil {
		return nil, err
	}
	// Not t.TempDir: its parents are root's and closed to the server's
	// user. The socket's path must stay short (107 bytes).
	dir, err := os.MkdirTemp("", "oc-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, exited: make(chan struct{})}
	fail := func(err error) (*Cluster, error) {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fail(err)
		}
	}
	data := filepath.Join(dir, "data")
	initdb := command(cred, filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", superuser,
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %v: %s", err, lastLines(string(out), 10)))
	}
	logPath := filepath.Join(dir, "server.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fail(err)
	}
	defer logf.Close()
	if cred != nil {
		_ = os.Chown(logPath, int(cred.Uid), int(cred.Gid))
	}
	args := []string{"-D", data, "-k", dir,
		"-c", "listen_addresses=", "-c", "unix_socket_permissions=0700",
		"-c", "max_connections=200", "-c", "log_min_messages=warning"}
	if !o.Durable {
		// A throwaway cluster: nothing needs to survive a crash, so it
		// never syncs.
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	if o.CommitDelay > 0 {
		args = append(args, "-c", fmt.Sprintf("commit_delay=%d", o.CommitDelay.Microseconds()), "-c", "commit_siblings=0")
	}
	if o.Statements {
		args = append(args, "-c", "shared_preload_libraries=pg_stat_statements", "-c", "pg_stat_statements.track=top",
			"-c", "pg_stat_statements.max=5000")
	}
	c.cmd = command(cred, filepath.Join(bin, "postgres"), args...)
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	if err := c.cmd.Start(); err != nil {
		return fail(fmt.Errorf("start postgres: %w", err))
	}
	go func() {
		c.waitErr = c.cmd.Wait()
		close(c.exited)
	}()
	if err := c.waitReady(30 * time.Second); err != nil {
		_ = c.cmd.Process.Kill()
		<-c.exited
		log, _ := os.ReadFile(logPath)
		return fail(fmt.Errorf("%w; server log: %s", err, lastLines(string(log), 10)))
	}
	return c, nil
}

// waitReady connects until the server accepts a connection, the server
// exits, or bound passes (a failure bound, not a wait for a deadline).
func (c *Cluster) waitReady(bound time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	for {
		conn, err := pgconn.Connect(ctx, c.ConnString("postgres"))
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-c.exited:
			return fmt.Errorf("postgres exited while starting: %v", c.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("postgres did not accept connections within %s: %v", bound, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ConnString is the key=value connection string of database db as the
// cluster's superuser, over the Unix socket.
func (c *Cluster) ConnString(db string) string {
	return fmt.Sprintf("host=%s user=%s dbname=%s sslmode=disable", c.dir, superuser, db)
}

// URL is the postgres:// form of ConnString.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://%s@/%s?host=%s&sslmode=disable", superuser, db, url.QueryEscape(c.dir))
}

// FreshDatabase creates a database no test of this binary has used and
// returns its name.
func (c *Cluster) FreshDatabase(ctx context.Context) (string, error) {
	name := fmt.Sprintf("db%d", c.schemas.Add(1))
	conn, err := pgconn.Connect(ctx, c.ConnString("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name).ReadAll(); err != nil {
		return "", err
	}
	return name, nil
}

// Dir is the cluster's directory (its socket is there).
func (c *Cluster) Dir() string { return c.dir }

// FreshSchema names a schema no test of this binary has used: the store
// creates it at its first open.
func (c *Cluster) FreshSchema() string {
	return fmt.Sprintf("t%d", c.schemas.Add(1))
}

// Stop stops the server (fast shutdown: connections are cut) and removes
// the directory.
func (c *Cluster) Stop() error {
	var err error
	select {
	case <-c.exited:
		err = fmt.Errorf("postgres had exited: %v", c.waitErr)
	default:
		_ = c.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-c.exited:
		case <-time.After(60 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.exited
			err = errors.New("postgres did not stop within 60s of a fast shutdown; killed")
		}
	}
	return errors.Join(err, os.RemoveAll(c.dir))
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
