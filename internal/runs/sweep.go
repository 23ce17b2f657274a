package runs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Remove stops serving the execution's socket and removes its run
// directory and, when it used one, its fallback socket directory. A run
// directory whose execution file names another execution is left alone and
// reported. Removing an execution that has no run directory does nothing.
func (d *Dirs) Remove(executionID string) error {
	if err := checkExecutionID(executionID); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closeLocked(executionID)
	dir := d.endpoint(executionID).Dir
	if id, err := readExecution(dir); err == nil && id != executionID {
		return fmt.Errorf("%w: %s names execution %s, not %s; it was left in place", ErrRunDirMismatch, dir, id, executionID)
	}
	return d.removeKey(Key(executionID))
}

// Swept is a run directory Sweep removed.
type Swept struct {
	// Key is the directory's name under <state>/runs/.
	Key string
	// ExecutionID is what its execution file named; empty when it had no
	// readable execution file.
	ExecutionID string
}

// Sweep removes every run directory whose execution keep rejects (the
// caller's view: terminal or unknown executions are rejected, running and
// parked ones kept), closing its socket first, and keeps the rest. It also
// removes what cannot belong to any execution: an entry of runs/ that is not
// a directory, a directory without a readable execution file, and a
// directory whose name is not the key of the execution it names. Run
// directories an earlier daemon left are swept the same way.
//
// keep is called without Dirs' lock held, so it may read storage; it must
// keep every execution that may still be prepared or served.
func (d *Dirs) Sweep(keep func(executionID string) bool) ([]Swept, error) {
	type candidate struct {
		Swept
		valid bool // a directory whose execution file names the execution of its key
	}
	d.mu.Lock()
	entries, err := os.ReadDir(d.Root())
	var found []candidate
	for _, e := range entries {
		c := candidate{Swept: Swept{Key: e.Name()}}
		if e.IsDir() {
			if id, err := readExecution(filepath.Join(d.Root(), e.Name())); err == nil {
				c.ExecutionID = id
				c.valid = Key(id) == e.Name()
			}
		}
		found = append(found, c)
	}
	d.mu.Unlock()
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("runs: list %s: %w", d.Root(), err)
	}

	var doomed []candidate
	for _, c := range found {
		if !c.valid || !keep(c.ExecutionID) {
			doomed = append(doomed, c)
		}
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	var swept []Swept
	var errs []error
	for _, c := range doomed {
		path := filepath.Join(d.Root(), c.Key)
		// Re-check under the lock: a Prepare in between may have claimed
		// the directory for a live execution.
		id, err := readExecution(path)
		if c.valid && (err != nil || id != c.ExecutionID) {
			continue
		}
		if !c.valid && err == nil && Key(id) == c.Key {
			continue
		}
		for _, m := range []map[string]*server{d.served, d.egress} {
			for exe, s := range m {
				if s.ep.Dir == path {
					d.closeLocked(exe)
				}
			}
		}
		if err := d.removeKey(c.Key); err != nil {
			errs = append(errs, err)
			continue
		}
		swept = append(swept, c.Swept)
	}
	return swept, errors.Join(errs...)
}

// removeKey removes <state>/runs/<key> and the key's fallback socket
// directory.
func (d *Dirs) removeKey(key string) error {
	if err := os.RemoveAll(filepath.Join(d.Root(), key)); err != nil {
		return fmt.Errorf("runs: remove run directory %s: %w", filepath.Join(d.Root(), key), err)
	}
	return d.removeFallback(key)
}

// removeFallback removes <tmp>/open-conduit-<uid>/<key> when it is a
// directory the host owns. The shared base stays.
func (d *Dirs) removeFallback(key string) error {
	if !isKey(key) {
		return nil // not a name Key makes, so never a fallback directory of ours
	}
	dir := filepath.Join(d.fallbackBase(), key)
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil
	}
	if owner, ok := ownerOf(fi); !fi.IsDir() || !ok || owner != d.uid {
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("runs: remove fallback socket directory %s: %w", dir, err)
	}
	return nil
}

// isKey reports whether name has the shape Key gives: 16 lower-case hex
// characters.
func isKey(name string) bool {
	if len(name) != 16 {
		return false
	}
	for _, r := range name {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}
