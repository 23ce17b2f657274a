package doctor

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/configsvc"
	"github.com/open-conduit/open-conduit/internal/daemon"
	"github.com/open-conduit/open-conduit/internal/runs"
	"github.com/open-conduit/open-conduit/internal/statedir"
)

// The finding codes of the state directory's checks.
const (
	CodeStateDirOK          = "state_dir_ok"
	CodeStateDirMissing     = "state_dir_missing"
	CodeStateDirNotDir      = "state_dir_not_directory"
	CodeStateDirOwner       = "state_dir_owner"
	CodeStateDirMode        = "state_dir_mode"
	CodePrivateDirMode      = "private_dir_mode"
	CodeTokenFileOK         = "token_file_ok"
	CodeTokenFileMissing    = "token_file_missing"
	CodeTokenFileUnsafe     = "token_file_unsafe"
	CodeTokenFileMode       = "token_file_mode"
	CodeSecretsFileMode     = "secrets_file_mode"
	CodeFileMode            = "file_mode"
	CodeManagementSocketOK  = "management_socket_ok"
	CodeManagementSocketLen = "management_socket_too_long"
	CodeRunSocketOK         = "run_socket_ok"
	CodeRunSocketFallback   = "run_socket_fallback"
	CodeRunSocketLen        = "run_socket_too_long"
	CodeOSBinaryOK          = "os_binary_ok"
	CodeOSBinaryMissing     = "os_binary_missing"
	CodeOSBinaryDangling    = "os_binary_dangling"
	CodeOSBinaryTemporary   = "os_binary_temporary"
	CodeOSBinaryLink        = "os_binary_link"
	CodeOSBinaryNotFile     = "os_binary_not_file"
	CodeOSBinaryNotExec     = "os_binary_not_executable"
	CodeDiskOK              = "disk_space_ok"
	CodeDiskLow             = "disk_space_low"
	CodeDiskCritical        = "disk_space_critical"
	CodeDiskUnknown         = "disk_space_unknown"
	CodeSandboxAvailable    = "sandbox_bwrap_available"
	CodeSandboxMissing      = "sandbox_bwrap_missing"
)

func (r *run) state() string { return r.opts.StateDir }

// path is a path under the state directory.
func (r *run) path(elem ...string) string {
	return filepath.Join(append([]string{r.state()}, elem...)...)
}

// restartFix is how the daemon is restarted so that it installs or
// repairs what it owns at start.
func (r *run) restartFix() string {
	return "restart the daemon (it repairs this at start): stop it (Ctrl-C, or systemctl --user restart open-conduit), then: open-conduit daemon --state " + r.state()
}

// everRan reports whether a daemon has ever started on the state
// directory: its coordination storage exists.
func (r *run) everRan() bool {
	_, err := os.Lstat(r.path(daemon.DatabaseFile))
	return err == nil
}

// checkStateDir checks that the state directory exists, is a directory,
// is the user's and is owner-only. It reports whether there is a
// directory to examine further.
func (r *run) checkStateDir() bool {
	dir := r.state()
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r.add(SeverityError, CodeStateDirMissing, "the state directory "+dir+" does not exist (pass the daemon's with --state DIR, or set $OPEN_CONDUIT_STATE)",
			"open-conduit daemon --state "+dir)
		return false
	case err != nil:
		r.add(SeverityError, CodeStateDirMissing, "the state directory "+dir+" cannot be examined: "+errText(err), "ls -ld "+dir)
		return false
	case !fi.IsDir():
		r.add(SeverityError, CodeStateDirNotDir, "the state directory "+dir+" is not a directory", "open-conduit doctor --state DIR (the daemon's state directory)")
		return false
	}
	bad := false
	if uid, ok := ownerOf(fi); !ok || uid != os.Geteuid() {
		r.add(SeverityError, CodeStateDirOwner, fmt.Sprintf("the state directory %s is owned by uid %d, not by you (uid %d); the daemon refuses it", dir, uid, os.Geteuid()),
			"run doctor and the daemon as the directory's owner, or use a state directory you own: open-conduit daemon --state DIR")
		bad = true
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		r.add(SeverityError, CodeStateDirMode, fmt.Sprintf("the state directory %s is accessible to other users (mode %04o); the daemon refuses it", dir, perm), "chmod 700 "+dir)
		bad = true
	}
	if !bad {
		r.add(SeverityOK, CodeStateDirOK, "the state directory "+dir+" is yours and owner-only", "")
	}
	return true
}

// checkModes checks the modes of the directories and files the daemon
// keeps owner-only: the token files are errors when others may read them,
// the rest warnings.
func (r *run) checkModes() {
	for _, dir := range r.privateDirs() {
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() {
			continue
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			r.add(SeverityError, CodePrivateDirMode, fmt.Sprintf("the directory %s is accessible to other users (mode %04o)", dir, perm), "chmod 700 "+dir)
		}
	}
	r.checkOwnerToken()
	runTokens, _ := filepath.Glob(r.path("runs", "*", "token", "token"))
	sort.Strings(runTokens)
	for _, p := range runTokens {
		if fi, err := os.Lstat(p); err == nil && fi.Mode().Perm()&0o077 != 0 {
			r.add(SeverityError, CodeTokenFileMode, fmt.Sprintf("the execution token file %s is readable by other users (mode %04o)", p, fi.Mode().Perm()),
				"chmod 600 "+p)
		}
	}
	secrets := r.path(config.SecretsFileName)
	if fi, err := os.Lstat(secrets); err == nil {
		if !fi.Mode().IsRegular() {
			r.add(SeverityError, CodeSecretsFileMode, secrets+" is not a regular file (a link?); the resolver refuses every file: secret", "replace "+secrets+" with the file itself, then: chmod 600 "+secrets)
		} else if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			r.add(SeverityError, CodeSecretsFileMode, fmt.Sprintf("%s is accessible to other users (mode %04o); the resolver refuses every file: secret", secrets, perm), "chmod 600 "+secrets)
		}
	}
	for _, p := range r.privateFiles() {
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o077 != 0 {
			r.add(SeverityWarning, CodeFileMode, fmt.Sprintf("%s is accessible to other users (mode %04o); the daemon writes it owner-only", p, fi.Mode().Perm()), "chmod 600 "+p)
		}
	}
}

// privateDirs are the directories the daemon keeps 0700.
func (r *run) privateDirs() []string {
	out := []string{r.path(statedir.PrivateDir), r.path(statedir.PrivateDir, configsvc.GenerationsDir), r.path("runs"), r.path(daemon.BinDir)}
	rundirs, _ := filepath.Glob(r.path("runs", "*"))
	tokendirs, _ := filepath.Glob(r.path("runs", "*", "token"))
	sort.Strings(rundirs)
	sort.Strings(tokendirs)
	return append(append(out, rundirs...), tokendirs...)
}

// privateFiles are the other files the daemon writes 0600.
func (r *run) privateFiles() []string {
	out := []string{}
	for _, name := range []string{daemon.DatabaseFile, daemon.DatabaseFile + "-wal", daemon.DatabaseFile + "-shm", configsvc.ConfigFileName, configsvc.ConfigFileName + configsvc.LastGoodSuffix} {
		out = append(out, r.path(name))
	}
	gens, _ := filepath.Glob(r.path(statedir.PrivateDir, configsvc.GenerationsDir, "*.json"))
	sort.Strings(gens)
	return append(out, gens...)
}

func (r *run) checkOwnerToken() {
	p := statedir.OwnerTokenPath(r.state())
	fi, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if r.everRan() {
			r.add(SeverityWarning, CodeTokenFileMissing, "the owner's token file "+p+" is missing, so the owner cannot reach the daemon",
				"stop the daemon, then: open-conduit auth recover --state "+r.state())
		} else {
			r.add(SeverityInfo, CodeTokenFileMissing, "the owner's token file "+p+" is not written yet: the daemon writes it at its first start", "open-conduit daemon --state "+r.state())
		}
		return
	case err != nil:
		r.add(SeverityError, CodeTokenFileUnsafe, "the owner's token file "+p+" cannot be examined: "+errText(err), "ls -l "+p)
		return
	case !fi.Mode().IsRegular():
		r.add(SeverityError, CodeTokenFileUnsafe, "the owner's token file "+p+" is not a regular file (a link?)",
			"rm "+p+" && open-conduit auth recover --state "+r.state()+" (with the daemon stopped)")
		return
	}
	if uid, ok := ownerOf(fi); !ok || uid != os.Geteuid() {
		r.add(SeverityError, CodeTokenFileUnsafe, fmt.Sprintf("the owner's token file %s is owned by uid %d, not by you", p, uid),
			"run doctor as the daemon's user, or recover the token: open-conduit auth recover --state "+r.state()+" (with the daemon stopped)")
		return
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		// The token may have been read meanwhile: rotate it too.
		r.add(SeverityError, CodeTokenFileMode, fmt.Sprintf("the owner's token file %s is readable by other users (mode %04o); the token may have been read, so rotate it too", p, perm),
			"chmod 600 "+p+" && open-conduit auth rotate")
		return
	}
	r.add(SeverityOK, CodeTokenFileOK, "the owner's token file "+p+" is owner-only", "")
}

// checkSockets checks the management socket's path and the run
// directories' socket paths against the limit the daemon enforces.
func (r *run) checkSockets() {
	abs, err := filepath.Abs(r.state())
	if err != nil {
		abs = r.state()
	}
	sock := filepath.Join(abs, statedir.SocketName)
	if err := statedir.CheckSocketPath(sock); err != nil {
		r.add(SeverityError, CodeManagementSocketLen, fmt.Sprintf("the management socket path %s is %d bytes, over the %d a Unix socket path may have; the daemon refuses to start", sock, len(sock), statedir.MaxSocketPath),
			"stop the daemon, move the state directory to a shorter path, and start it there: mv "+r.state()+" SHORTER_DIR && open-conduit daemon --state SHORTER_DIR")
	} else {
		r.add(SeverityOK, CodeManagementSocketOK, fmt.Sprintf("the management socket path is %d bytes, within %d", len(sock), statedir.MaxSocketPath), "")
	}
	dirs, err := runs.New(abs, runs.Options{TmpBase: r.opts.TmpBase, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return
	}
	// Every key has the same length, so one execution id stands for all.
	primary := filepath.Join(dirs.Root(), runs.Key("exe"), "toolbelt.sock")
	got, err := dirs.SocketPath("exe")
	switch {
	case err != nil:
		r.add(SeverityError, CodeRunSocketLen, fmt.Sprintf("an execution's toolbelt socket path would be %d bytes in its run directory and its short fallback under %s too long as well (over %d): attempts cannot use the toolbelt", len(primary), r.opts.TmpBase, runs.MaxSocketPath),
			"stop the daemon, move the state directory to a shorter path, and start it there: mv "+r.state()+" SHORTER_DIR && open-conduit daemon --state SHORTER_DIR")
	case got != primary:
		r.add(SeverityInfo, CodeRunSocketFallback, fmt.Sprintf("an execution's toolbelt socket path would be %d bytes in its run directory (over %d), so the sockets go under %s instead; to keep them in the state directory, use a shorter one", len(primary), runs.MaxSocketPath, filepath.Dir(filepath.Dir(got))), "")
	default:
		r.add(SeverityOK, CodeRunSocketOK, fmt.Sprintf("an execution's toolbelt socket path is %d bytes, within %d", len(primary), runs.MaxSocketPath), "")
	}
}

// checkOSBinary checks <state>/bin/os, the `os` the daemon puts first on
// every execution's PATH: a regular, executable file (the daemon installs
// a copy of itself), not a link (earlier releases linked it, and under `go
// run` the link's target vanished with the build directory).
func (r *run) checkOSBinary() {
	p := r.path(daemon.BinDir, daemon.OSName)
	fi, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		switch {
		case r.daemonUp:
			r.add(SeverityError, CodeOSBinaryMissing, p+" is missing, so executions have no os command", r.restartFix())
		case r.everRan():
			r.add(SeverityWarning, CodeOSBinaryMissing, p+" is missing; the daemon installs it at its next start", "open-conduit daemon --state "+r.state())
		default:
			r.add(SeverityInfo, CodeOSBinaryMissing, p+" is not installed yet: the daemon installs it at its first start", "open-conduit daemon --state "+r.state())
		}
		return
	case err != nil:
		r.add(SeverityError, CodeOSBinaryNotFile, p+" cannot be examined: "+errText(err), "ls -l "+p)
		return
	case fi.Mode().Type() == fs.ModeSymlink:
		target, _ := os.Readlink(p)
		if _, err := os.Stat(p); err != nil {
			r.add(SeverityError, CodeOSBinaryDangling, p+" is a link to "+target+", which no longer exists (a go run build directory that vanished?): executions cannot run os", r.restartFix())
			return
		}
		if temporary(target) {
			r.add(SeverityError, CodeOSBinaryTemporary, p+" is a link into the temporary build directory "+filepath.Dir(target)+", which vanishes when go run exits", r.restartFix())
			return
		}
		r.add(SeverityWarning, CodeOSBinaryLink, p+" is a link (an earlier release made it); the daemon now installs a copy of itself", r.restartFix())
		return
	case !fi.Mode().IsRegular():
		r.add(SeverityError, CodeOSBinaryNotFile, p+" is not a regular file: executions cannot run os", "rm -r "+p+" && "+r.restartFix())
		return
	case fi.Mode().Perm()&0o100 == 0:
		r.add(SeverityError, CodeOSBinaryNotExec, fmt.Sprintf("%s is not executable (mode %04o): executions cannot run os", p, fi.Mode().Perm()), "chmod 755 "+p)
		return
	}
	r.add(SeverityOK, CodeOSBinaryOK, p+" is an executable file (the daemon installs a copy of itself there)", "")
}

// temporary reports whether a link target lies in a temporary build
// directory: go run's (go-build…) or anything under the temporary
// directory.
func temporary(target string) bool {
	if strings.Contains(target, string(filepath.Separator)+"go-build") {
		return true
	}
	tmp := filepath.Clean(os.TempDir())
	return strings.HasPrefix(filepath.Clean(target), tmp+string(filepath.Separator))
}

// checkDisk checks the free space of the state directory's file system
// against DiskErrorBytes and DiskWarnBytes.
func (r *run) checkDisk() {
	d, err := r.opts.Statfs(r.state())
	if err != nil {
		r.add(SeverityWarning, CodeDiskUnknown, "the free space of the file system holding "+r.state()+" cannot be measured: "+errText(err), "df -h "+r.state())
		return
	}
	fix := "free space on the file system holding " + r.state() + "; see what takes it: df -h " + r.state() + " && du -sh " + r.path(daemon.ArtifactsDir) + " " + r.path(daemon.ExecutionsDir) + " " + r.path(daemon.WorkspacesDir)
	switch {
	case d.Available < DiskErrorBytes:
		r.add(SeverityError, CodeDiskCritical, fmt.Sprintf("the file system holding the state directory has %s available, under %s: storage commits and attempt logs can fail", size(d.Available), size(DiskErrorBytes)), fix)
	case d.Available < DiskWarnBytes:
		r.add(SeverityWarning, CodeDiskLow, fmt.Sprintf("the file system holding the state directory has %s available, under %s", size(d.Available), size(DiskWarnBytes)), fix)
	default:
		r.add(SeverityOK, CodeDiskOK, fmt.Sprintf("the file system holding the state directory has %s available", size(d.Available)), "")
	}
}

// checkSandbox says whether bubblewrap is installed, for the sandbox.
func (r *run) checkSandbox() {
	if p, err := r.opts.LookPath("bwrap"); err == nil {
		r.add(SeverityInfo, CodeSandboxAvailable, "bubblewrap (bwrap) is installed at "+p+", for sandboxed executions", "")
		return
	}
	r.add(SeverityInfo, CodeSandboxMissing, "bubblewrap (bwrap) is not on PATH, so executions cannot be sandboxed with it",
		"install bubblewrap: sudo apt-get install bubblewrap (Debian, Ubuntu) or sudo dnf install bubblewrap (Fedora)")
}

func statfs(path string) (DiskSpace, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return DiskSpace{}, err
	}
	return DiskSpace{Available: st.Bavail * uint64(st.Bsize), Total: st.Blocks * uint64(st.Bsize)}, nil
}

func ownerOf(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, false
	}
	return int(st.Uid), true
}

// size formats a byte count for people.
func size(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	default:
		return fmt.Sprintf("%d KiB", n>>10)
	}
}

// errText is an error's words without the path a *fs.PathError repeats.
func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
