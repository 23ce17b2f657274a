package agentrun

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/executor/agent"
	"github.com/open-conduit/open-conduit/internal/executor/proc"
)

// DefaultKeepFailed is how long a failed Work's checkout is kept for a
// look before SweepWorkspaces removes it.
const DefaultKeepFailed = 24 * time.Hour

// Files of a workspace, <root>/<key>/.
const (
	workspaceFile = "workspace.json"
	checkoutDir   = "checkout"
	gitLogFile    = "git.log"
)

// maxGitTime bounds one git command of a checkout.
const maxGitTime = 10 * time.Minute

// WorkspaceKey is the directory name of a Work's workspace: the first 16
// bytes of the SHA-256 of its id, in hex. Work ids never name a path
// themselves.
func WorkspaceKey(workID string) string {
	sum := sha256.Sum256([]byte(workID))
	return hex.EncodeToString(sum[:16])
}

type workspaceRecord struct {
	WorkID    string    `json:"work_id"`
	CreatedAt time.Time `json:"created_at"`
}

// workdir is the agent's working directory for req: the config's
// directory, the Work's own checkout of its repository, or the
// execution's work directory. Its error is a safe message.
func (e *Executor) workdir(ctx context.Context, req executor.RunRequest, cfg agent.Config) (string, error) {
	switch {
	case cfg.Workdir.Dir != "":
		if fi, err := os.Stat(cfg.Workdir.Dir); err != nil || !fi.IsDir() {
			return "", errors.New("the config's workdir is not a directory the daemon can reach")
		}
		return cfg.Workdir.Dir, nil
	case cfg.Workdir.Repository != "":
		return e.checkout(ctx, req, cfg.Workdir)
	default:
		dir := filepath.Join(req.Dir, workDir)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", errors.New("cannot create the execution's work directory: " + proc.ErrText(err))
		}
		return dir, nil
	}
}

// checkout returns the Work's checkout of w, cloning it the first time: a
// clone beside it, renamed into place only once it is whole, so a
// checkout that is there is complete.
func (e *Executor) checkout(ctx context.Context, req executor.RunRequest, w agent.Workdir) (string, error) {
	if e.opts.Workspaces == "" {
		return "", errors.New("this daemon has no workspaces directory, so it cannot check out the config's repository")
	}
	if req.WorkID == "" {
		return "", errors.New("the run request names no Work, so the repository has no workspace")
	}
	ws := filepath.Join(e.opts.Workspaces, WorkspaceKey(req.WorkID))
	dst := filepath.Join(ws, checkoutDir)
	if exists(dst) {
		return dst, nil
	}
	if err := os.MkdirAll(ws, 0o700); err != nil {
		return "", errors.New("cannot create the Work's workspace: " + proc.ErrText(err))
	}
	if !exists(filepath.Join(ws, workspaceFile)) {
		if err := proc.WriteJSONFile(ws, workspaceFile, workspaceRecord{WorkID: req.WorkID, CreatedAt: e.opts.Clock.Now().UTC()}); err != nil {
			return "", errors.New("cannot record the Work's workspace: " + proc.ErrText(err))
		}
	}
	tmp, err := os.MkdirTemp(ws, "clone-")
	if err != nil {
		return "", errors.New("cannot create the Work's checkout: " + proc.ErrText(err))
	}
	defer os.RemoveAll(tmp)
	log, err := os.OpenFile(filepath.Join(ws, gitLogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return "", errors.New("cannot open the checkout's git log: " + proc.ErrText(err))
	}
	defer log.Close()
	git := func(dir string, args ...string) error {
		cctx, cancel := context.WithTimeout(ctx, maxGitTime)
		defer cancel()
		cmd := exec.CommandContext(cctx, e.opts.Git, args...)
		cmd.Dir = dir
		// Nothing of the operator's git configuration, no prompt for a
		// credential: a checkout is the repository's, as configured.
		cmd.Env = []string{"PATH=" + e.opts.Path, "HOME=" + ws, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_TERMINAL_PROMPT=0", "LC_ALL=C"}
		var errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = log, &errb
		err := cmd.Run()
		log.Write(errb.Bytes())
		var ee *exec.ExitError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ee):
			return fmt.Errorf("git %s exited with status %d (see the workspace's git.log)", args[0], ee.ExitCode())
		default:
			return fmt.Errorf("git could not run (%s)", proc.ErrText(err))
		}
	}
	clone := filepath.Join(tmp, checkoutDir)
	if err := git(tmp, "clone", "--quiet", "--", w.Repository, clone); err != nil {
		return "", errors.New("cannot clone the config's repository: " + err.Error())
	}
	if w.Ref != "" {
		if err := git(clone, "fetch", "--quiet", "origin", w.Ref); err != nil {
			return "", errors.New("cannot fetch the config's ref: " + err.Error())
		}
		if err := git(clone, "checkout", "--quiet", "--detach", "FETCH_HEAD"); err != nil {
			return "", errors.New("cannot check out the config's ref: " + err.Error())
		}
	}
	if err := os.Rename(clone, dst); err != nil && !exists(dst) {
		return "", errors.New("cannot put the Work's checkout in place: " + proc.ErrText(err))
	}
	return dst, nil
}

// WorkEnd is what SweepWorkspaces asks of its caller about a Work.
type WorkEnd struct {
	// Known: the Work exists.
	Known bool
	// Ended: it has ended; Failed: it ended failed, at EndedAt.
	Ended   bool
	Failed  bool
	EndedAt time.Time
}

// WorkStatus tells how a Work stands.
type WorkStatus func(ctx context.Context, workID string) (WorkEnd, error)

// SweepWorkspaces removes the workspaces under root whose Work has ended
// (or is unknown), keeping a failed Work's for keepFailed after it ended
// (DefaultKeepFailed when zero). A workspace whose record cannot be read
// is removed only once it is older than keepFailed by its modification
// time; one whose Work cannot be judged now is kept. It returns how many it
// removed.
func SweepWorkspaces(ctx context.Context, root string, now time.Time, keepFailed time.Duration, status WorkStatus) (int, error) {
	if keepFailed <= 0 {
		keepFailed = DefaultKeepFailed
	}
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	removed := 0
	var errs []error
	for _, en := range entries {
		if ctx.Err() != nil {
			return removed, ctx.Err()
		}
		if !en.IsDir() || strings.HasPrefix(en.Name(), ".") {
			continue
		}
		ws := filepath.Join(root, en.Name())
		var rec workspaceRecord
		ok, rerr := proc.ReadJSONFile(ws, workspaceFile, &rec)
		remove := false
		if !ok || rerr != nil || rec.WorkID == "" || WorkspaceKey(rec.WorkID) != en.Name() {
			if fi, err := en.Info(); err == nil && now.Sub(fi.ModTime()) > keepFailed {
				remove = true
			}
		} else {
			st, err := status(ctx, rec.WorkID)
			switch {
			case err != nil:
			case !st.Known:
				remove = true
			case st.Ended && !st.Failed:
				remove = true
			case st.Ended && st.Failed && !now.Before(st.EndedAt.Add(keepFailed)):
				remove = true
			}
		}
		if !remove {
			continue
		}
		if err := os.RemoveAll(ws); err != nil {
			errs = append(errs, fmt.Errorf("cannot remove the workspace %s: %w", en.Name(), err))
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}
