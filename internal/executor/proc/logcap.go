package proc

import (
	"io"
	"strconv"
	"unicode/utf8"
)

// DefaultLogLimit is how much of a command's output the log keeps unless the
// executor is configured otherwise.
const DefaultLogLimit = 8 << 20

// DefaultStreamLimit is how much of a command's stdout a stream file keeps
// unless the launch says otherwise.
const DefaultStreamLimit = 64 << 20

// TruncationMarker is the text a capped log holds where it was cut.
func TruncationMarker(limit int64) string { return truncationMarker(limit) }

// truncationMarker is written once, where the log was cut.
func truncationMarker(limit int64) string {
	return "\n[open-conduit: the log reached its limit of " + strconv.FormatInt(limit, 10) +
		" bytes; the rest of the output was discarded]\n"
}

// cappedLog keeps the first limit bytes written to it, then a truncation
// marker, and discards the rest. It never fails a write, so that the copy
// from the command's pipe keeps draining (a full pipe would block the
// command); the first error writing to the file is kept in err.
type cappedLog struct {
	w         io.Writer
	limit     int64
	written   int64
	truncated bool
	// quiet: cut without a marker (a stream stays lines of JSON).
	quiet bool
	err   error
}

func (l *cappedLog) Write(p []byte) (int, error) {
	if l.truncated || l.err != nil {
		return len(p), nil
	}
	room := l.limit - l.written
	if int64(len(p)) <= room {
		l.put(p)
		return len(p), nil
	}
	head := p[:room]
	// Cut before a rune the limit would split, so the log stays valid
	// UTF-8 when the output was.
	for i := len(head) - 1; i >= 0 && i >= len(head)-utf8.UTFMax; i-- {
		if utf8.RuneStart(head[i]) {
			if !utf8.FullRune(head[i:]) {
				head = head[:i]
			}
			break
		}
	}
	l.put(head)
	if !l.quiet {
		l.put([]byte(truncationMarker(l.limit)))
	}
	l.truncated = true
	return len(p), nil
}

func (l *cappedLog) put(p []byte) {
	if l.err != nil {
		return
	}
	n, err := l.w.Write(p)
	l.written += int64(n)
	l.err = err
}
