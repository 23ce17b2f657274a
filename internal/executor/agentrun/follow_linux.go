package agentrun

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/open-conduit/open-conduit/internal/executor/agent"
)

// follower reads a segment's stream as the supervisor appends to it, woken
// by inotify events on the segment's directory (never by a timer), and
// closes its parked channel once the lines so far satisfy its test.
type follower struct {
	in       *os.File // the inotify instance; nil when following failed
	parkedC  chan struct{}
	done     chan struct{}
	closeOne sync.Once
}

// startFollowing follows dir/name. A stream that cannot be followed (no
// inotify) is not followed: the segment then ends only by itself or its
// deadline.
func startFollowing(dir, name string, newParser func() Parser, test func(Summary) bool) *follower {
	f := &follower{parkedC: make(chan struct{}), done: make(chan struct{})}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		close(f.done)
		return f
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MODIFY|unix.IN_CLOSE_WRITE|unix.IN_MOVED_TO); err != nil {
		unix.Close(fd)
		close(f.done)
		return f
	}
	// A non-blocking fd is taken by the runtime's poller: Read parks the
	// goroutine until an event arrives, and Close ends it.
	f.in = os.NewFile(uintptr(fd), "inotify")
	go f.run(filepath.Join(dir, name), newParser(), test)
	return f
}

func (f *follower) run(path string, p Parser, test func(Summary) bool) {
	defer close(f.done)
	var (
		stream  *os.File
		partial []byte
		over    bool
		buf     = make([]byte, 64*1024)
		events  = make([]byte, 4096)
	)
	defer func() {
		if stream != nil {
			stream.Close()
		}
	}()
	for {
		if stream == nil {
			if s, err := os.Open(path); err == nil {
				stream = s
			}
		}
		if stream != nil {
			for {
				n, err := stream.Read(buf)
				partial, over = feed(p, partial, over, buf[:n])
				if n == 0 || err != nil {
					break
				}
			}
			if test(p.Summary()) {
				close(f.parkedC)
				return
			}
		}
		if _, err := f.in.Read(events); err != nil && !errors.Is(err, unix.EINTR) && !errors.Is(err, unix.EAGAIN) {
			return // closed
		}
	}
}

// feed hands p the complete lines of chunk, after what partial held; a
// line longer than agent.MaxLine is skipped to its end.
func feed(p Parser, partial []byte, over bool, chunk []byte) ([]byte, bool) {
	for len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			if !over {
				if len(partial)+len(chunk) > agent.MaxLine {
					partial, over = partial[:0], true
				} else {
					partial = append(partial, chunk...)
				}
			}
			return partial, over
		}
		if !over && len(partial)+i <= agent.MaxLine {
			line := append(partial, chunk[:i]...)
			p.Line(bytes.TrimSuffix(line, []byte{'\r'}))
		}
		partial, over = partial[:0], false
		chunk = chunk[i+1:]
	}
	return partial, over
}

// parked is closed once the stream satisfied the test.
func (f *follower) parked() <-chan struct{} { return f.parkedC }

// close stops following and waits for the follower to end.
func (f *follower) close() {
	f.closeOne.Do(func() {
		if f.in != nil {
			f.in.Close()
		}
	})
	<-f.done
}
