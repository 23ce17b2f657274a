package doctor

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"time"

	"github.com/open-conduit/open-conduit/client"
	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/daemon"
)

// Severity is how much a finding matters. Only SeverityError fails
// `open-conduit doctor`.
type Severity string

// The severities.
const (
	SeverityError   Severity = "error"   // something is broken: exit status 1
	SeverityWarning Severity = "warning" // probably not what the operator meant
	SeverityInfo    Severity = "info"    // worth knowing, nothing to fix
	SeverityOK      Severity = "ok"      // a check that passed
)

// Finding is one result of a check. Message and Fix never hold a secret, a
// token or a configured value; Fix is the exact command to run (empty
// when there is nothing to do).
type Finding struct {
	Severity Severity `json:"severity"`
	Code     string   `json:"code"`
	Message  string   `json:"message"`
	Fix      string   `json:"fix"`
}

// Report is every finding, in the order the checks ran, and whether none
// is an error. Its JSON is the shape `open-conduit doctor --json` prints.
type Report struct {
	Findings []Finding `json:"findings"`
	OK       bool      `json:"ok"`
}

// Daemon is what doctor asks a daemon that answers; *client.Client is
// one. Tests give their own.
type Daemon interface {
	Health(ctx context.Context) (*client.Health, error)
	Config(ctx context.Context, opts *client.RequestOptions) (*client.Config, error)
	ValidateConfig(ctx context.Context, doc []byte) (*client.Validation, error)
	ListWork(ctx context.Context, f client.WorkFilter) (*client.List[client.Work], error)
}

// DiskSpace is what the state directory's file system has left.
type DiskSpace struct {
	Available uint64 // bytes an unprivileged user may still write
	Total     uint64 // bytes of the file system
}

// Thresholds of the disk space check: below DiskErrorBytes available the
// daemon can fail to commit (SQLite needs room for its journal and
// checkpoints) or to write an attempt's log; below DiskWarnBytes it soon
// will.
const (
	DiskErrorBytes = 100 << 20 // 100 MiB
	DiskWarnBytes  = 1 << 30   // 1 GiB
)

// Bounds of the checks.
const (
	// SecretTimeout bounds the resolution of one secret (a cmd: reference
	// has its own 10 s deadline inside it) and the keyring probe.
	SecretTimeout = 15 * time.Second
	// MaxHeldWork is how many held Work doctor lists one by one; past it,
	// one finding says how many more there are.
	MaxHeldWork = 20
	// maxWorkPages bounds the pages of Work read per state.
	maxWorkPages = 20
)

// Options say what to examine and give the checks their parts. StateDir
// and Registry are required; a nil part takes the production one.
type Options struct {
	// StateDir is the daemon's state directory.
	StateDir string
	// ConfigFile, when set, is the configuration checked instead of the
	// one the daemon runs.
	ConfigFile string
	// Registry is what the release registers (daemon.ReleaseRegistry()).
	Registry *config.Registry
	// Default is the configuration a first start activates when the state
	// directory has no config.json (bootstrap.DefaultConfig()).
	Default []byte
	// Daemon, when set, is asked for what the daemon knows; nil checks
	// offline only. Socket names the management socket it dials, for
	// messages.
	Daemon Daemon
	Socket string
	// Keyring answers keyring: references and the keyring probe; nil is
	// the platform keyring.
	Keyring config.Keyring
	// Reaper runs cmd: references as the daemon does (`open-conduit reap
	// --`); nil runs them without it.
	Reaper []string
	// LookupEnv reads this process's environment; nil is os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Statfs measures the file system holding a path; nil is statfs(2).
	Statfs func(path string) (DiskSpace, error)
	// LookPath finds a program on PATH; nil is exec.LookPath.
	LookPath func(string) (string, error)
	// TmpBase is where the run directories' short socket paths go; ""
	// is /tmp, as the daemon's.
	TmpBase string
	// After starts a timer; nil is time.After. Tests fire their own.
	After func(time.Duration) <-chan time.Time
	// Store, when its URL is set, is the daemon's PostgreSQL store, whose
	// connection and schema version are checked (read only); its StateDir
	// and Keyring default to the options'.
	Store daemon.StoreOptions
}

// Run performs every check and returns the report. It never fails: what
// it cannot examine is itself a finding.
func Run(ctx context.Context, opts Options) (Report, error) {
	if opts.StateDir == "" {
		return Report{}, errors.New("doctor: Options need a StateDir")
	}
	if opts.Registry == nil {
		return Report{}, errors.New("doctor: Options need a Registry")
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	if opts.Statfs == nil {
		opts.Statfs = statfs
	}
	if opts.LookPath == nil {
		opts.LookPath = exec.LookPath
	}
	if opts.After == nil {
		opts.After = time.After
	}
	if opts.Keyring == nil {
		opts.Keyring = config.SystemKeyring{}
	}
	if opts.TmpBase == "" {
		opts.TmpBase = "/tmp"
	}
	r := &run{opts: opts}
	exists := r.checkStateDir()
	if exists {
		r.checkModes()
		r.checkSockets()
	}
	r.daemonUp = r.checkDaemon(ctx)
	r.checkStore(ctx)
	if exists {
		r.checkOSBinary()
		r.checkDisk()
	}
	r.checkHeldWork(ctx)
	r.checkPackages(ctx)
	snap := r.checkConfig(ctx)
	usesKeyring := r.checkSecrets(ctx, snap)
	r.checkKeyring(ctx, usesKeyring)
	r.checkSandbox()
	rep := Report{Findings: r.findings, OK: true}
	if rep.Findings == nil {
		rep.Findings = []Finding{}
	}
	for _, f := range rep.Findings {
		if f.Severity == SeverityError {
			rep.OK = false
		}
	}
	return rep, nil
}

// run is one doctor run: its options and what it found so far.
type run struct {
	opts     Options
	findings []Finding
	daemonUp bool
	// activeHash is the daemon's active generation's hash, when it said.
	activeHash string
	activeGen  int64
}

func (r *run) add(sev Severity, code, msg, fix string) {
	r.findings = append(r.findings, Finding{Severity: sev, Code: code, Message: msg, Fix: fix})
}

// withTimeout is ctx ended after d by the injected timer.
func (r *run) withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	fire := r.opts.After(d)
	go func() {
		select {
		case <-fire:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
