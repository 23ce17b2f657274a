// Package logfollow reads a log that another process may still be
// writing: what it holds now, or its last lines, and then, when asked to
// follow, what is appended to it, until its writer closes it or the
// caller says the writer is gone.
//
// On Linux it learns of appends and of the writer closing the file from
// inotify (a watch on the file's directory, so a log that does not exist
// yet is seen when it is created); it never polls for data there. The one
// timer it keeps asks the caller's Ended at a bounded interval, because
// some ends have no file event at all: a writer that closed the file
// before the watch began, or an attempt that ended without ever creating
// its log. Elsewhere, without inotify, that same interval is also when it
// looks for appended data (documented in docs/api.md).
//
// It must never write to, truncate, move or remove the log, never hold
// more than one read buffer of it in memory, and never decide anything
// about the attempt that writes it: whether the attempt ended is the
// caller's answer.
package logfollow

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"time"
)

// Recheck is how often Follow asks Ended when no file event came.
const Recheck = 2 * time.Second

// Options say what Follow writes and when it stops.
type Options struct {
	// Tail, when above zero, starts at the log's last Tail lines instead
	// of its beginning.
	Tail int
	// Follow keeps reading what is appended until the writer closes the
	// log or Ended says it is gone; without it Follow writes what the log
	// holds now and returns.
	Follow bool
	// Ended reports whether the log's writer is gone for good (its
	// attempt ended); required when Follow is set. Once it says so,
	// Follow writes what remains and returns.
	Ended func() bool
	// Flush, when set, is called after every write, so that a stream
	// reaches its reader at once.
	Flush func()
	// Stop, when closed, ends Follow at once (the server is shutting
	// down).
	Stop <-chan struct{}
	// Recheck overrides the interval Ended is asked at (tests); zero
	// takes Recheck.
	Recheck time.Duration
	// NewTicker makes the recheck ticker (tests inject one they drive);
	// nil takes time.NewTicker's.
	NewTicker func(d time.Duration) (<-chan time.Time, func())
}

// ErrStopped is returned when Stop closed or ctx ended before the writer
// was done.
var ErrStopped = errors.New("logfollow: stopped before the log ended")

// Follow writes the log at path to w as Options say. A log that does not
// exist is empty: without Follow nothing is written; with it, Follow
// waits for the log to be created (or for Ended).
func Follow(ctx context.Context, path string, w io.Writer, o Options) error {
	if !o.Follow {
		f, err := os.Open(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		defer f.Close()
		if err := seekTail(f, o.Tail); err != nil {
			return err
		}
		return drain(f, w, o.Flush)
	}
	if o.Ended == nil {
		return errors.New("logfollow: Follow needs Ended")
	}
	every := o.Recheck
	if every <= 0 {
		every = Recheck
	}
	newTicker := o.NewTicker
	if newTicker == nil {
		newTicker = func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(d)
			return t.C, t.Stop
		}
	}
	tick, stopTick := newTicker(every)
	defer stopTick()
	watch := newWatcher(path)
	defer watch.close()

	var f *os.File
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	// open opens the log once it exists and places the read position.
	open := func() error {
		if f != nil {
			return nil
		}
		var err error
		f, err = os.Open(path)
		if errors.Is(err, fs.ErrNotExist) {
			f = nil
			return nil
		}
		if err != nil {
			return err
		}
		return seekTail(f, o.Tail)
	}
	// finish writes what remains once the writer is gone.
	finish := func() error {
		if err := open(); err != nil {
			return err
		}
		if f == nil {
			return nil
		}
		return drain(f, w, o.Flush)
	}
	for {
		if err := open(); err != nil {
			return err
		}
		if f != nil {
			if err := drain(f, w, o.Flush); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ErrStopped
		case <-o.Stop:
			return ErrStopped
		case ev, ok := <-watch.events():
			if !ok {
				// The watcher failed; the recheck still ends the stream.
				watch = noWatcher{}
				continue
			}
			if ev == closedWrite {
				return finish()
			}
		case <-tick:
			if o.Ended() {
				return finish()
			}
			watch.retry()
		}
	}
}

// drain copies what the file holds from its read position to w.
func drain(f io.Reader, w io.Writer, flush func()) error {
	buf := make([]byte, 32<<10)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			if flush != nil {
				flush()
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// seekTail places f's read position at the start of its last n lines (a
// last line without its newline counts as one); n <= 0 leaves it at the
// start.
func seekTail(f Log, n int) error {
	if n <= 0 {
		return nil
	}
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	if end == 0 {
		return nil
	}
	const chunk = 32 << 10
	buf := make([]byte, chunk)
	pos := end
	// A final newline ends the last line; it does not start another.
	newlines := 0
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, end-1); err != nil {
		return err
	}
	skipFinal := last[0] == '\n'
	for pos > 0 {
		size := int64(chunk)
		if pos < size {
			size = pos
		}
		pos -= size
		b := buf[:size]
		if _, err := f.ReadAt(b, pos); err != nil {
			return err
		}
		for i := len(b) - 1; i >= 0; i-- {
			if b[i] != '\n' {
				continue
			}
			if skipFinal && pos+int64(i) == end-1 {
				continue
			}
			newlines++
			if newlines == n {
				_, err := f.Seek(pos+int64(i)+1, io.SeekStart)
				return err
			}
		}
	}
	_, err = f.Seek(0, io.SeekStart)
	return err
}

// event is what a watcher reports.
type event int

const (
	// changed: the log was created, appended to or moved into place.
	changed event = iota
	// closedWrite: a writer of the log closed it.
	closedWrite
)

// watcher reports changes of one log file.
type watcher interface {
	events() <-chan event
	// retry adds the watch if it could not be added yet (the directory
	// did not exist).
	retry()
	close()
}

// noWatcher reports nothing: the recheck alone notices changes.
type noWatcher struct{}

func (noWatcher) events() <-chan event { return nil }
func (noWatcher) retry()               {}
func (noWatcher) close()               {}

// Log is an open log: a file, or the bytes of a stored artifact.
type Log interface {
	io.Reader
	io.ReaderAt
	io.Seeker
}

// Copy writes an open log (a stored one, say) to w from its beginning, or
// from its last tail lines when tail is above zero.
func Copy(f Log, w io.Writer, tail int, flush func()) error {
	if err := seekTail(f, tail); err != nil {
		return err
	}
	return drain(f, w, flush)
}
