package runs

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/open-conduit/open-conduit/internal/atomicfile"
	"github.com/open-conduit/open-conduit/internal/unixsock"
)

// MaxSocketPath is the longest socket path the host binds: macOS limits a
// Unix socket path to 104 bytes, and the host keeps a margin below that.
const MaxSocketPath = 100

// EgressSocketName is the egress proxy's socket, beside the toolbelt
// socket (in the run directory, or in its short-path fallback directory).
const EgressSocketName = "egress.sock"

// Names inside a run directory.
const (
	executionFile = "execution"
	tokenDirName  = "token"
	tokenFileName = "token"
	socketName    = "toolbelt.sock"
	egressName    = EgressSocketName

	// tokenTempPrefix starts the name of the token file's temporary,
	// which writeToken clears when an interrupted write left one.
	tokenTempPrefix = ".token-"
)

// Errors. Each is wrapped with a message that names the path involved and
// says what to do; callers test them with errors.Is.
var (
	// ErrEndpointUnavailable: no safe socket path of at most MaxSocketPath
	// bytes exists for the execution. The attempt cannot use the toolbelt.
	ErrEndpointUnavailable = errors.New("toolbelt endpoint unavailable")
	// ErrUnsafeDirectory: a directory the host would use is a symlink, not a
	// directory, owned by another user, or reachable by other users.
	ErrUnsafeDirectory = errors.New("unsafe directory")
	// ErrRunDirMismatch: the run directory's execution file names another
	// execution.
	ErrRunDirMismatch = errors.New("run directory belongs to another execution")
)

// Key returns the run directory name of an execution: the first 16 hex
// characters of the SHA-256 of its ID. Execution IDs are opaque and may
// contain '/', so they never name a path themselves.
func Key(executionID string) string {
	sum := sha256.Sum256([]byte(executionID))
	return hex.EncodeToString(sum[:8])
}

// Endpoint is where an execution reaches its toolbelt.
type Endpoint struct {
	// Dir is the run directory, <state>/runs/<key>.
	Dir string
	// Socket is the toolbelt socket: Dir/toolbelt.sock, or the short-path
	// fallback under <tmp>/open-conduit-<uid>/<key>/.
	Socket string
	// TokenFile is Dir/token/token, replaced by rename on every rotation.
	TokenFile string
	// Egress is the egress proxy's socket, egress.sock in Socket's
	// directory (ServeEgress).
	Egress string
}

// Options tune a Dirs. Logger is required; the other fields' zero values
// are the production setting.
type Options struct {
	// TmpBase is the directory under which the short-path fallback
	// open-conduit-<uid>/ is made; "/tmp" when empty. Tests inject their own.
	TmpBase string
	// Logger receives the socket servers' own errors (failed accepts,
	// malformed requests). Required.
	Logger *slog.Logger
	// Limits bound each execution socket's connections and body read
	// time; zero fields take unixsock.ToolbeltLimits.
	Limits unixsock.Limits
}

// Dirs manages the run directories under <state>/runs/ and the sockets
// served in them. It is safe for concurrent use.
type Dirs struct {
	state   string
	tmpBase string
	uid     int
	logger  *slog.Logger
	limits  unixsock.Limits

	mu     sync.Mutex
	served map[string]*server // by execution ID
	egress map[string]*server // the egress sockets, by execution ID
}

// New returns the Dirs of the state directory state, which must exist.
func New(state string, opts Options) (*Dirs, error) {
	if state == "" {
		return nil, errors.New("runs: the state directory is empty")
	}
	if opts.Logger == nil {
		return nil, errors.New("runs: Options need a Logger")
	}
	abs, err := filepath.Abs(state)
	if err != nil {
		return nil, fmt.Errorf("runs: resolve the state directory: %w", err)
	}
	tmp := opts.TmpBase
	if tmp == "" {
		tmp = "/tmp"
	}
	if tmp, err = filepath.Abs(tmp); err != nil {
		return nil, fmt.Errorf("runs: resolve the fallback socket base: %w", err)
	}
	return &Dirs{
		state:   abs,
		tmpBase: tmp,
		uid:     os.Getuid(),
		logger:  opts.Logger,
		limits:  opts.Limits,
		served:  map[string]*server{},
		egress:  map[string]*server{},
	}, nil
}

// Root returns <state>/runs.
func (d *Dirs) Root() string { return filepath.Join(d.state, "runs") }

// Prepare makes the execution's run directory ready for a segment: it
// creates <state>/runs/<key>/ (0700), writes the execution file or checks
// that it names executionID, chooses the socket path (creating the
// owner-only fallback directories when the path under the state directory
// would pass MaxSocketPath bytes), and writes token to token/token through a
// temporary file in token/ and a rename, so a process that sees token/
// through a directory mount sees every rotation. Call it after every token
// issue; it does not start serving (see Serve).
func (d *Dirs) Prepare(executionID, token string) (Endpoint, error) {
	if err := checkExecutionID(executionID); err != nil {
		return Endpoint{}, err
	}
	if token == "" || strings.ContainsAny(token, "\r\n\x00") {
		// Never echo the token, not even a bad one.
		return Endpoint{}, errors.New("runs: the token is empty or holds a line break; issue a fresh token")
	}
	d.mu.Lock()
	defer d.mu.Unlock()

	if err := ensureDir(d.Root(), d.uid, true); err != nil {
		return Endpoint{}, fmt.Errorf("runs: prepare %s: %w", d.Root(), err)
	}
	ep := d.endpoint(executionID)
	if err := ensureDir(ep.Dir, d.uid, true); err != nil {
		return Endpoint{}, fmt.Errorf("runs: prepare run directory: %w", err)
	}
	if err := claimExecutionFile(ep.Dir, executionID); err != nil {
		return Endpoint{}, err
	}
	socket, err := d.socketPath(Key(executionID), true)
	if err != nil {
		return Endpoint{}, err
	}
	ep.Socket = socket
	ep.Egress = filepath.Join(filepath.Dir(socket), egressName)
	tokenDir := filepath.Dir(ep.TokenFile)
	if err := ensureDir(tokenDir, d.uid, true); err != nil {
		return Endpoint{}, fmt.Errorf("runs: prepare token directory: %w", err)
	}
	if err := writeToken(tokenDir, token); err != nil {
		return Endpoint{}, fmt.Errorf("runs: write the token file in %s: %w", tokenDir, err)
	}
	return ep, nil
}

// endpoint returns the run directory and token file of an execution; the
// socket is chosen by socketPath.
func (d *Dirs) endpoint(executionID string) Endpoint {
	dir := filepath.Join(d.Root(), Key(executionID))
	return Endpoint{
		Dir:       dir,
		Socket:    filepath.Join(dir, socketName),
		TokenFile: filepath.Join(dir, tokenDirName, tokenFileName),
		Egress:    filepath.Join(dir, egressName),
	}
}

// fallbackBase is <tmp>/open-conduit-<uid>.
func (d *Dirs) fallbackBase() string {
	return filepath.Join(d.tmpBase, fmt.Sprintf("open-conduit-%d", d.uid))
}

// socketPath chooses the socket of the execution with key. With create it
// makes the fallback directories (owner-only, refused when they exist
// otherwise); without, it only computes the path.
func (d *Dirs) socketPath(key string, create bool) (string, error) {
	primary := filepath.Join(d.Root(), key, socketName)
	if len(primary) <= MaxSocketPath {
		return primary, nil
	}
	base := d.fallbackBase()
	dir := filepath.Join(base, key)
	fallback := filepath.Join(dir, socketName)
	if len(fallback) > MaxSocketPath {
		return "", fmt.Errorf("%w: the socket path %s is %d bytes and its short-path fallback %s is %d bytes, both over the %d-byte limit of a Unix socket path; use a shorter state directory",
			ErrEndpointUnavailable, primary, len(primary), fallback, len(fallback), MaxSocketPath)
	}
	if !create {
		return fallback, nil
	}
	for _, p := range []string{base, dir} {
		if err := ensureDir(p, d.uid, false); err != nil {
			return "", fmt.Errorf("%w: the socket of a long state directory goes in %s: %w", ErrEndpointUnavailable, dir, err)
		}
	}
	return fallback, nil
}

func checkExecutionID(id string) error {
	if id == "" || strings.ContainsAny(id, "\r\n\x00") {
		return errors.New("runs: the execution ID is empty or holds a line break")
	}
	return nil
}

// ensureDir makes path an owner-only directory of uid: a missing directory
// is created 0700, and an existing one must pass checkPrivateDir.
func ensureDir(path string, uid int, tighten bool) error {
	if err := os.Mkdir(path, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return checkPrivateDir(path, uid, tighten)
}

// checkPrivateDir checks that path is a real directory (not a symlink)
// owned by uid and closed to everyone else. One reachable by others is
// tightened to 0700 with tighten (the host's own state directory) and
// refused without (a shared base such as /tmp).
func checkPrivateDir(path string, uid int, tighten bool) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory (a symlink or file is there); remove it", ErrUnsafeDirectory, path)
	}
	if owner, ok := ownerOf(fi); !ok || owner != uid {
		return fmt.Errorf("%w: %s is owned by another user; remove it or give it to uid %d with mode 0700", ErrUnsafeDirectory, path, uid)
	}
	if fi.Mode().Perm()&0o077 == 0 {
		return nil
	}
	if !tighten {
		return fmt.Errorf("%w: %s has mode %04o, open to other users; remove it or make it 0700 (chmod 700)", ErrUnsafeDirectory, path, fi.Mode().Perm())
	}
	return os.Chmod(path, 0o700)
}

// ownerOf returns the uid owning fi.
func ownerOf(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

// readExecution reads the execution file of a run directory.
func readExecution(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, executionFile))
	if err != nil {
		return "", err
	}
	id := strings.TrimRight(string(b), "\r\n")
	if checkExecutionID(id) != nil {
		return "", errors.New("the execution file is empty or malformed")
	}
	return id, nil
}

// claimExecutionFile writes the execution file of dir, or checks that it
// names executionID.
func claimExecutionFile(dir, executionID string) error {
	id, err := readExecution(dir)
	switch {
	case err == nil && id == executionID:
		return nil
	case err == nil:
		return fmt.Errorf("%w: %s names execution %s, not %s; if %s has finished, remove the directory (the daemon's sweep does so for finished executions)",
			ErrRunDirMismatch, dir, id, executionID, id)
	case errors.Is(err, fs.ErrNotExist):
		// A fresh directory, or one whose Prepare crashed before writing it.
	default:
		return fmt.Errorf("runs: read %s: %w; remove the run directory if its execution has finished", filepath.Join(dir, executionFile), err)
	}
	if err := replaceFile(dir, executionFile, ".execution-", executionID+"\n"); err != nil {
		return fmt.Errorf("runs: write %s: %w", filepath.Join(dir, executionFile), err)
	}
	return nil
}

// writeToken replaces dir/token with token through a temporary file in dir
// and a rename, removing temporaries an interrupted earlier write left.
func writeToken(dir, token string) error {
	if stale, _ := filepath.Glob(filepath.Join(dir, tokenTempPrefix+"*")); len(stale) > 0 {
		for _, p := range stale {
			_ = os.Remove(p)
		}
	}
	return replaceFile(dir, tokenFileName, tokenTempPrefix, token+"\n")
}

// replaceFile atomically replaces dir/name with content (mode 0600): a
// temporary file in dir named tmpPrefix and random characters, fsync,
// rename, fsync of dir. The temporary file is in dir itself, so a process
// watching dir (the token directory, mounted into a sandbox) sees the
// rename.
func replaceFile(dir, name, tmpPrefix, content string) error {
	return atomicfile.WriteFile(filepath.Join(dir, name), []byte(content), 0o600, atomicfile.TempPrefix(tmpPrefix))
}
