package logfollow

import (
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// inotifyWatcher watches the log's directory, so that the log is seen
// when it is created, and reports the events that name the log.
type inotifyWatcher struct {
	dir, name string
	file      *os.File
	ch        chan event
	once      sync.Once
	mu        sync.Mutex
	added     bool
	done      chan struct{}
}

const watchMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_MOVED_TO | unix.IN_ONLYDIR

func newWatcher(path string) watcher {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return noWatcher{}
	}
	w := &inotifyWatcher{
		dir: filepath.Dir(path), name: filepath.Base(path),
		// A non-blocking descriptor goes to the runtime's poller, so the
		// read below parks without a thread and Close wakes it.
		file: os.NewFile(uintptr(fd), "inotify"),
		ch:   make(chan event, 1), done: make(chan struct{}),
	}
	w.retry()
	go w.read()
	return w
}

func (w *inotifyWatcher) events() <-chan event { return w.ch }

func (w *inotifyWatcher) retry() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.added {
		return
	}
	if _, err := unix.InotifyAddWatch(int(w.file.Fd()), w.dir, watchMask); err == nil {
		w.added = true
		// The log may have been written between the first look and the
		// watch: say so once, so the caller reads again.
		w.send(changed)
	}
}

// send delivers ev, keeping at most one change pending: a change already
// queued says the same. A close is never dropped.
func (w *inotifyWatcher) send(ev event) {
	for {
		select {
		case w.ch <- ev:
			return
		case <-w.done:
			return
		default:
		}
		if ev == changed {
			return
		}
		// Make room for the close: drop the pending change.
		select {
		case <-w.ch:
		default:
		}
	}
}

func (w *inotifyWatcher) read() {
	defer close(w.ch)
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := w.file.Read(buf)
		if err != nil {
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			raw := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameBytes := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(raw.Len)]
			off += unix.SizeofInotifyEvent + int(raw.Len)
			name := string(nameBytes)
			for i := 0; i < len(name); i++ {
				if name[i] == 0 {
					name = name[:i]
					break
				}
			}
			switch {
			case raw.Mask&unix.IN_Q_OVERFLOW != 0:
				w.send(changed)
			case raw.Mask&unix.IN_IGNORED != 0:
				// The directory went: nothing more will come.
				return
			case name != w.name:
			case raw.Mask&unix.IN_CLOSE_WRITE != 0:
				w.send(closedWrite)
			default:
				w.send(changed)
			}
		}
	}
}

func (w *inotifyWatcher) close() {
	w.once.Do(func() {
		close(w.done)
		w.file.Close()
	})
}
