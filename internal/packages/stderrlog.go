package packages

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// StderrLog keeps the newest bytes of a package's stderr (at most limit),
// and, given a directory, writes them to <dir>/<name>.log, owner-only,
// renamed to <name>.log.1 when it would pass limit: the runtimes' one
// record of what a package wrote, never read into an error or the
// daemon's log.
type StderrLog struct {
	mu    sync.Mutex
	limit int
	tail  []byte
	path  string
	f     *os.File
	size  int
}

// NewStderrLog opens name's log in dir ("": kept in memory only).
func NewStderrLog(dir, name string, limit int) (*StderrLog, error) {
	l := &StderrLog{limit: limit}
	if dir == "" {
		return l, nil
	}
	l.path = filepath.Join(dir, name+".log")
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	l.f, l.size = f, int(st.Size())
	return l, nil
}

// Write keeps b (its newest limit bytes) and appends it to the file; it
// never fails, so a package never blocks on its log.
func (l *StderrLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(b)
	if len(b) > l.limit {
		b = b[len(b)-l.limit:]
	}
	l.tail = append(l.tail, b...)
	if over := len(l.tail) - l.limit; over > 0 {
		l.tail = append(l.tail[:0:0], l.tail[over:]...)
	}
	if l.f != nil {
		if l.size+len(b) > l.limit {
			l.f.Close()
			_ = os.Rename(l.path, l.path+".1")
			f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			if err != nil {
				l.f = nil
				return n, nil
			}
			l.f, l.size = f, 0
		}
		w, _ := l.f.Write(b)
		l.size += w
	}
	return n, nil
}

// Tail is a copy of the newest bytes kept.
func (l *StderrLog) Tail() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.tail)
}

// Close closes the file; later writes are kept in memory only.
func (l *StderrLog) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
}
