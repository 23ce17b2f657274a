package packages

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/atomicfile"
)

// The store's layout under the state directory: <state>/packages/<name>/
// holds files/ (the copy of the package's files) and record.json (what
// was installed, and when).
const (
	StoreDir   = "packages"
	FilesDir   = "files"
	RecordFile = "record.json"
)

// Limits of what install copies.
const (
	maxFiles      = 10000
	maxTotalBytes = 256 << 20
)

// Record is what the store keeps of an installed package beside its
// files.
type Record struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
	// Digest is "sha256:<hex>" over the files (see Digest).
	Digest string `json:"digest"`
	// Accepted are the permissions the operator accepted.
	Accepted    []string  `json:"accepted_permissions"`
	InstalledAt time.Time `json:"installed_at"`
	// Manifest is the manifest as installed: what the host still knows
	// of a package whose files changed since.
	Manifest Manifest `json:"manifest"`
}

// ChangedError refuses an installed package whose files differ from the
// digest it was installed with. Its message names the package and the
// command that fixes it, never a file's contents.
type ChangedError struct {
	Name string
}

// CodeChanged is the code of a ChangedError wherever it is shown.
const CodeChanged = "package_changed"

func (e *ChangedError) Error() string {
	return fmt.Sprintf("package %s: its installed files changed since it was installed (a file was changed, added or removed); it is not run until reinstalled: open-conduit packages install DIR (or remove it: open-conduit packages remove %s)", e.Name, e.Name)
}

// ErrNotInstalled: no package of that name is installed.
var ErrNotInstalled = fmt.Errorf("%w: no such package is installed", extension.ErrNotFound)

// Store is the install store under a state directory. Its methods are not
// safe for concurrent use on the same name; the host serialises them.
type Store struct {
	// Dir is <state>/packages.
	Dir string
	// Now is the injected clock's reading, for the install time.
	Now func() time.Time
}

// NewStore returns the store of a state directory.
func NewStore(stateDir string, now func() time.Time) *Store {
	return &Store{Dir: filepath.Join(stateDir, StoreDir), Now: now}
}

// Digest is "sha256:<hex>" over dir's file tree: every entry's path
// (slash-separated, relative, in lexical order), its type, for a file its
// mode as the store keeps it (executable or not) and the SHA-256 of its
// contents. Anything but directories and regular files (a symlink, a
// device) is refused, as is a tree larger than install copies.
func Digest(dir string) (string, error) {
	sum := sha256.New()
	files := 0
	var total int64
	err := walk(dir, func(rel string, d fs.DirEntry, info fs.FileInfo) error {
		if d.IsDir() {
			fmt.Fprintf(sum, "d %s\n", rel)
			return nil
		}
		files++
		total += info.Size()
		if files > maxFiles || total > maxTotalBytes {
			return fmt.Errorf("%w: the package has more than %d files or %d MiB", extension.ErrInvalid, maxFiles, maxTotalBytes>>20)
		}
		h, err := hashFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			return err
		}
		fmt.Fprintf(sum, "f %s %o %s\n", rel, storedMode(info.Mode()), h)
		return nil
	})
	if err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(sum.Sum(nil)), nil
}

// storedMode is the mode the store gives a file: owner-only, executable
// when any execute bit is set.
func storedMode(m fs.FileMode) fs.FileMode {
	if m.Perm()&0o111 != 0 {
		return 0o700
	}
	return 0o600
}

// walk visits dir's entries below it, in lexical order, refusing any that
// is neither a directory nor a regular file.
func walk(dir string, visit func(rel string, d fs.DirEntry, info fs.FileInfo) error) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			if !d.IsDir() {
				return fmt.Errorf("%w: not a directory", extension.ErrInvalid)
			}
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !d.IsDir() && !d.Type().IsRegular() {
			return fmt.Errorf("%w: %s is neither a directory nor a regular file (symlinks and devices are not installed)", extension.ErrInvalid, rel)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return visit(rel, d, info)
	})
}

func hashFile(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// dir is an installed package's directory.
func (s *Store) dir(name string) string { return filepath.Join(s.Dir, name) }

// Install copies src's files into the store as package m (replacing an
// installed package of the same name), pinned by digest, which must be
// src's digest as the operator was shown it: a copy whose digest differs
// (a file changed meanwhile) is refused with ErrConflict and nothing is
// replaced. accepted are the permissions the operator accepted.
func (s *Store) Install(src string, m Manifest, digest string, accepted []string) (Installed, Record, error) {
	if err := extension.RegistrationName(m.Name); err != nil {
		return Installed{}, Record{}, err
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return Installed{}, Record{}, fmt.Errorf("cannot create the package store: %w", err)
	}
	stage, err := os.MkdirTemp(s.Dir, ".install-"+m.Name+"-")
	if err != nil {
		return Installed{}, Record{}, fmt.Errorf("cannot create the package store's staging directory: %w", err)
	}
	defer os.RemoveAll(stage)
	files := filepath.Join(stage, FilesDir)
	if err := copyTree(src, files); err != nil {
		return Installed{}, Record{}, err
	}
	got, err := Digest(files)
	if err != nil {
		return Installed{}, Record{}, err
	}
	if got != digest {
		return Installed{}, Record{}, fmt.Errorf("%w: package %s: its files changed since they were checked; run the install again to see what it provides now", extension.ErrConflict, m.Name)
	}
	kind := m.Kind
	if kind == "" {
		kind = KindProtocol
	}
	rec := Record{Name: m.Name, Version: m.Version, Kind: kind, Digest: digest, Accepted: slices.Clone(accepted), InstalledAt: s.Now().UTC(), Manifest: m}
	if rec.Accepted == nil {
		rec.Accepted = []string{}
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return Installed{}, Record{}, err
	}
	if err := atomicfile.WriteFile(filepath.Join(stage, RecordFile), append(data, '\n'), 0o600); err != nil {
		return Installed{}, Record{}, fmt.Errorf("cannot write the package's record: %w", err)
	}
	target := s.dir(m.Name)
	var old string
	if _, err := os.Lstat(target); err == nil {
		old = filepath.Join(s.Dir, ".remove-"+m.Name+"-"+filepath.Base(stage))
		if err := os.Rename(target, old); err != nil {
			return Installed{}, Record{}, fmt.Errorf("cannot move the installed package aside: %w", err)
		}
	}
	if err := os.Rename(stage, target); err != nil {
		if old != "" {
			_ = os.Rename(old, target)
		}
		return Installed{}, Record{}, fmt.Errorf("cannot move the package into the store: %w", err)
	}
	if old != "" {
		_ = os.RemoveAll(old)
	}
	syncDir(s.Dir)
	return Installed{Manifest: m, Dir: filepath.Join(target, FilesDir), Digest: digest, Accepted: slices.Clone(rec.Accepted), Verify: func() error { return s.Verify(m.Name) }}, rec, nil
}

// copyTree copies src's directories and regular files to dst (which must
// not exist), every directory 0700 and every file owner-only.
func copyTree(src, dst string) error {
	if err := os.Mkdir(dst, 0o700); err != nil {
		return err
	}
	files := 0
	var total int64
	return walk(src, func(rel string, d fs.DirEntry, info fs.FileInfo) error {
		to := filepath.Join(dst, filepath.FromSlash(rel))
		if d.IsDir() {
			return os.Mkdir(to, 0o700)
		}
		files++
		total += info.Size()
		if files > maxFiles || total > maxTotalBytes {
			return fmt.Errorf("%w: the package has more than %d files or %d MiB", extension.ErrInvalid, maxFiles, maxTotalBytes>>20)
		}
		in, err := os.Open(filepath.Join(src, filepath.FromSlash(rel)))
		if err != nil {
			return err
		}
		defer in.Close()
		_, err = atomicfile.WriteFrom(to, in, storedMode(info.Mode()))
		return err
	})
}

func syncDir(dir string) {
	if f, err := os.Open(dir); err == nil {
		_ = f.Sync()
		f.Close()
	}
}

// Names lists the installed packages' names, sorted. Entries that are
// not packages (an interrupted install's staging directory) are skipped.
func (s *Store) Names() ([]string, error) {
	ents, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && extension.RegistrationName(e.Name()) == nil {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// Sweep removes what an install or a remove cut short left in the store
// (its staging and set-aside directories); the daemon calls it at start,
// before any install can run.
func (s *Store) Sweep() error {
	ents, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".install-") || strings.HasPrefix(e.Name(), ".remove-") {
			errs = append(errs, os.RemoveAll(filepath.Join(s.Dir, e.Name())))
		}
	}
	return errors.Join(errs...)
}

// Record reads an installed package's record.
func (s *Store) Record(name string) (Record, error) {
	if extension.RegistrationName(name) != nil {
		return Record{}, ErrNotInstalled
	}
	data, err := os.ReadFile(filepath.Join(s.dir(name), RecordFile))
	if errors.Is(err, fs.ErrNotExist) {
		return Record{}, ErrNotInstalled
	}
	if err != nil {
		return Record{}, err
	}
	var rec Record
	if err := json.Unmarshal(data, &rec); err != nil || rec.Name != name {
		return Record{}, &ChangedError{Name: name}
	}
	return rec, nil
}

// Load verifies an installed package against its record and returns it
// with its manifest and playbooks, checked again against opts. A package
// whose files differ from its digest, or whose copied manifest no longer
// checks, is a *ChangedError.
func (s *Store) Load(name string, opts CheckOptions) (Installed, *Checked, Record, error) {
	rec, err := s.Record(name)
	if err != nil {
		return Installed{}, nil, Record{}, err
	}
	files := filepath.Join(s.dir(name), FilesDir)
	if err := verifyModes(files); err != nil {
		return Installed{}, nil, rec, &ChangedError{Name: name}
	}
	got, err := Digest(files)
	if err != nil || got != rec.Digest {
		return Installed{}, nil, rec, &ChangedError{Name: name}
	}
	c := Check(files, opts)
	if !c.Valid() || c.Manifest.Name != name {
		return Installed{}, c, rec, &ChangedError{Name: name}
	}
	return Installed{Manifest: c.Manifest, Dir: files, Digest: rec.Digest, Accepted: slices.Clone(rec.Accepted), Verify: func() error { return s.Verify(name) }}, c, rec, nil
}

// Verify checks that an installed package's files still match its
// digest (before each start of its process).
func (s *Store) Verify(name string) error {
	rec, err := s.Record(name)
	if err != nil {
		return err
	}
	files := filepath.Join(s.dir(name), FilesDir)
	if err := verifyModes(files); err != nil {
		return &ChangedError{Name: name}
	}
	if got, err := Digest(files); err != nil || got != rec.Digest {
		return &ChangedError{Name: name}
	}
	return nil
}

// verifyModes checks that the copy is still owner-only, as install left
// it.
func verifyModes(dir string) error {
	return walk(dir, func(rel string, d fs.DirEntry, info fs.FileInfo) error {
		want := fs.FileMode(0o700)
		if !d.IsDir() {
			want = storedMode(info.Mode())
		}
		if info.Mode().Perm() != want {
			return fmt.Errorf("%w: %s has another mode than install gave it", extension.ErrInvalid, rel)
		}
		return nil
	})
}

// Remove deletes an installed package's files and record.
func (s *Store) Remove(name string) error {
	if _, err := s.Record(name); err != nil && !errors.As(err, new(*ChangedError)) {
		return err
	}
	gone := filepath.Join(s.Dir, ".remove-"+name)
	_ = os.RemoveAll(gone)
	if err := os.Rename(s.dir(name), gone); err != nil {
		return fmt.Errorf("cannot remove package %s: %w", name, err)
	}
	syncDir(s.Dir)
	return os.RemoveAll(gone)
}
