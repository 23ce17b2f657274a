package agent

import (
	"bufio"
	"errors"
	"io"
)

// MaxLine is the default longest line a stream parser reads whole; longer
// lines are skipped and counted.
const MaxLine = 1 << 20

// LineStats counts what a line reader skipped.
type LineStats struct {
	// Lines is the number of complete lines handed on.
	Lines int
	// Oversized counts lines longer than the limit, skipped whole.
	Oversized int
	// Truncated is set when the stream ended inside a line (no final
	// newline); that partial line is not handed on.
	Truncated bool
}

// ReadLines reads r line by line and calls fn with each complete line
// (without its newline, and without a trailing carriage return), no longer
// than max bytes (MaxLine when max <= 0). A line longer than max is
// skipped to its newline and counted; a final line without a newline is
// not handed on, since a stream cut there was cut mid-object. fn must not
// keep the slice. ReadLines returns the reader's error, nil at io.EOF.
func ReadLines(r io.Reader, max int, fn func(line []byte)) (LineStats, error) {
	if max <= 0 {
		max = MaxLine
	}
	var st LineStats
	br := bufio.NewReaderSize(r, 64*1024)
	var buf []byte
	over := false
	for {
		chunk, err := br.ReadSlice('\n')
		complete := err == nil
		if len(chunk) > 0 {
			if complete {
				chunk = chunk[:len(chunk)-1]
			}
			if !over {
				if len(buf)+len(chunk) > max {
					over, buf = true, buf[:0]
				} else {
					buf = append(buf, chunk...)
				}
			}
		}
		if complete {
			if over {
				st.Oversized++
			} else {
				line := buf
				if n := len(line); n > 0 && line[n-1] == '\r' {
					line = line[:n-1]
				}
				st.Lines++
				fn(line)
			}
			buf, over = buf[:0], false
			continue
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(buf) > 0 || over {
			st.Truncated = true
		}
		if errors.Is(err, io.EOF) {
			return st, nil
		}
		return st, err
	}
}
