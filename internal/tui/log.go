package tui

import (
	"bytes"
	"context"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/open-conduit/open-conduit/client"
)

// The log view follows the daemon's log stream of one execution, or of a
// Work across its attempts, from its start until the attempt ends; the
// stream is cut when the view is left.

// maxLog bounds the log the view keeps; older lines are dropped.
const maxLog = 1 << 20

// logWriter hands what the stream copies to the model, one chunk at a
// time, until the stream's context ends.
type logWriter struct {
	ctx context.Context
	ch  chan<- []byte
}

func (w logWriter) Write(p []byte) (int, error) {
	select {
	case w.ch <- bytes.Clone(p):
		return len(p), nil
	case <-w.ctx.Done():
		return 0, w.ctx.Err()
	}
}

// follow reads a log from its start and follows it while the attempt
// runs.
var follow = client.LogOptions{Follow: true}

// startLog opens the stream of the current frame.
func (m *Model) startLog() tea.Cmd {
	m.logGen++
	gen := m.logGen
	m.logBuf = nil
	m.log.SetContent("")
	m.log.Width, m.log.Height = m.width, m.logHeight()
	m.logState = "following the log…"
	ctx, cancel := context.WithCancel(context.Background())
	m.logCancel = cancel
	ch := make(chan []byte, 16)
	m.logCh = ch
	c, f := m.c, m.cur
	stream := func() tea.Msg {
		defer close(ch)
		w := logWriter{ctx: ctx, ch: ch}
		var err error
		if f.execution != "" {
			_, err = c.ExecutionLog(ctx, f.execution, follow, w)
		} else {
			_, err = c.WorkLog(ctx, f.work, follow, w)
		}
		return logEndMsg{gen: gen, err: err}
	}
	return tea.Batch(stream, m.waitLog())
}

// waitLog delivers the next chunk of the current stream.
func (m *Model) waitLog() tea.Cmd {
	ch, gen := m.logCh, m.logGen
	if ch == nil {
		return nil
	}
	return func() tea.Msg {
		b, ok := <-ch
		if !ok {
			return nil
		}
		return logChunkMsg{gen: gen, data: b}
	}
}

func (m *Model) appendLog(b []byte) {
	atBottom := m.log.AtBottom() || len(m.logBuf) == 0
	m.logBuf = append(m.logBuf, b...)
	if len(m.logBuf) > maxLog {
		cut := len(m.logBuf) - maxLog
		if i := bytes.IndexByte(m.logBuf[cut:], '\n'); i >= 0 {
			cut += i + 1
		}
		m.logBuf = append([]byte(nil), m.logBuf[cut:]...)
	}
	m.log.SetContent(string(m.logBuf))
	if atBottom {
		m.log.GotoBottom()
	}
}

// stopLog cuts the stream, if one runs.
func (m *Model) stopLog() {
	if m.logCancel != nil {
		m.logCancel()
		m.logCancel = nil
	}
	m.logCh = nil
}
