// Package atomicfile replaces files so that a reader, a crash or a process
// watching the directory sees either the old file or the whole new one:
// the bytes go to a temporary file in the target's own directory, which
// gets its mode, is synced, and is renamed (or, for WriteNew, linked) over
// the target, and then the directory is synced (both syncs are left out
// for a file a machine's crash may lose, NoSync).
//
// It must never leave a file readable by anyone its mode does not allow,
// not even for the moment between create and chmod; never write the
// target in place; never put a temporary file outside the target's
// directory (a watcher through a directory mount must see the rename); and
// never leave a temporary file behind when it returns.
package atomicfile

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// An Option adjusts one write.
type Option func(*options)

type options struct {
	prefix    string
	noSync    bool
	noDirSync bool
}

// TempPrefix names the temporary file prefix followed by random characters,
// for a caller that clears what an interrupted write left by name. The
// default prefix is "." + the target's base name + ".tmp-".
func TempPrefix(prefix string) Option { return func(o *options) { o.prefix = prefix } }

// NoSync skips both syncs: the file and its rename reach the disk when the
// kernel writes them back. Readers still see the old file or the whole new
// one, and a process crash loses nothing; only a crash of the machine may
// leave the old file, no file or an empty one. It is for files that mean
// nothing after a reboot (a process record checked against the boot id) or
// whose loss a crash could have caused a moment earlier anyway.
func NoSync() Option { return func(o *options) { o.noSync = true } }

// NoDirSync syncs the file but not its directory: the bytes are durable,
// the new name is not until the caller syncs the directory (SyncDir), as
// a caller that makes many names in one directory does once for all.
func NoDirSync() Option { return func(o *options) { o.noDirSync = true } }

// SyncDir syncs the directory dir, making the names made in it durable.
func SyncDir(dir string) error { return syncDir(dir) }

func settle(path string, opts []Option) options {
	o := options{prefix: "." + filepath.Base(path) + ".tmp-"}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WriteFile replaces path with data, mode perm.
func WriteFile(path string, data []byte, perm fs.FileMode, opts ...Option) error {
	_, err := WriteFrom(path, bytes.NewReader(data), perm, opts...)
	return err
}

// WriteFrom replaces path with what r holds, mode perm, and returns the
// number of bytes written. If it fails before the rename, path is as it
// was; if only the final sync of the directory fails, the new file is in
// place and the error says the rename may not survive a crash.
func WriteFrom(path string, r io.Reader, perm fs.FileMode, opts ...Option) (int64, error) {
	o := settle(path, opts)
	tmp, n, err := stage(path, r, perm, o)
	if err != nil {
		return 0, err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return 0, err
	}
	if o.noSync {
		return n, nil
	}
	return n, syncDir(filepath.Dir(path))
}

// WriteNew creates path with data, mode perm, unless path already exists:
// then it returns an error wrapping fs.ErrExist and path is untouched.
// The file appears whole or not at all, and the first writer wins.
func WriteNew(path string, data []byte, perm fs.FileMode, opts ...Option) error {
	_, err := WriteNewFrom(path, bytes.NewReader(data), perm, opts...)
	return err
}

// WriteNewFrom is WriteNew with what r holds; it returns the number of
// bytes written.
func WriteNewFrom(path string, r io.Reader, perm fs.FileMode, opts ...Option) (int64, error) {
	o := settle(path, opts)
	tmp, n, err := stage(path, r, perm, o)
	if err != nil {
		return 0, err
	}
	err = os.Link(tmp, path)
	_ = os.Remove(tmp)
	if err != nil {
		return 0, err
	}
	if o.noSync || o.noDirSync {
		return n, nil
	}
	return n, syncDir(filepath.Dir(path))
}

// Symlink replaces path with a symbolic link to target: a process that
// resolves path meanwhile finds the old link or the new one, never
// nothing.
func Symlink(target, path string, opts ...Option) error {
	o := settle(path, opts)
	// Reserve a fresh name, then put the link there: os.Symlink does not
	// replace, so a name CreateTemp just made unique is freed first.
	f, err := os.CreateTemp(filepath.Dir(path), o.prefix+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	f.Close()
	if err := os.Remove(tmp); err != nil {
		return err
	}
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if o.noSync {
		return nil
	}
	return syncDir(filepath.Dir(path))
}

// stage writes r to a synced temporary file of mode perm next to path and
// returns its name; on failure nothing is left behind.
func stage(path string, r io.Reader, perm fs.FileMode, o options) (string, int64, error) {
	// CreateTemp makes the file 0600, so it is never wider than the owner
	// before the chmod narrows or sets its mode.
	f, err := os.CreateTemp(filepath.Dir(path), o.prefix+"*")
	if err != nil {
		return "", 0, err
	}
	var n int64
	err = f.Chmod(perm)
	if err == nil {
		n, err = io.Copy(f, r)
	}
	if err == nil && !o.noSync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", 0, err
	}
	return f.Name(), n, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("cannot open %s to sync it: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("cannot sync %s: %w", dir, err)
	}
	return nil
}
