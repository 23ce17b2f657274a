// Package tui is `open-conduit tui`: a terminal UI, on bubbletea, with live
// views of the daemon's Work, executions, waits, events and their causal
// chains, pending approvals and a running attempt's log, and the operator's
// actions (cancel, retry, wake, approve, deny), each behind a confirmation.
//
// Everything it shows and does goes through the public client package, as
// any other client of the management socket: it must never read the state
// directory or storage, never act without the operator's confirmation, and
// never show a token or a configured value (a refusal is shown as the
// API's code and message only). The client has no push channel for lists,
// so the views are read again on an injected ticker (DefaultRefresh) and
// after every action; the log view follows the daemon's log stream.
package tui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	"github.com/charmbracelet/bubbles/viewport"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/open-conduit/open-conduit/client"
)

// DefaultRefresh is how often the views are read again when Options.Refresh
// is zero.
const DefaultRefresh = 2 * time.Second

// DefaultApprovalsRefresh is how often the pending approvals are read
// again when Options.ApprovalsRefresh is zero. It is slower than the other
// views because the human extension lists them through an operator action,
// and the daemon records every action as a core.action Event.
const DefaultApprovalsRefresh = 30 * time.Second

// Options configure the TUI.
type Options struct {
	// Client is the daemon's management client (required).
	Client *client.Client
	// Refresh is the interval between two reads of the current view and
	// the daemon's health; DefaultRefresh when zero.
	Refresh time.Duration
	// ApprovalsRefresh is the interval of the approvals view, at least
	// Refresh; DefaultApprovalsRefresh when zero.
	ApprovalsRefresh time.Duration
	// Ticker returns the command that ends one refresh interval of d (its
	// message is dropped, and a refresh follows); tea.Tick when nil. A
	// Ticker returning nil never refreshes on its own.
	Ticker func(d time.Duration) tea.Cmd
	// Reason is recorded on the control events the TUI's actions make.
	Reason string
}

// Run runs the TUI on in and out (a terminal, in its alternate screen)
// until the operator quits or ctx ends.
func Run(ctx context.Context, o Options, in io.Reader, out io.Writer) error {
	m := New(o)
	p := tea.NewProgram(m, tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out), tea.WithAltScreen())
	_, err := p.Run()
	m.stopLog()
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// The views.
type view int

const (
	viewWork view = iota
	viewExecutions
	viewWaits
	viewEvents
	viewChain
	viewApprovals
	viewLog
)

// frame is one place in the navigation: a view and what it is of.
type frame struct {
	view view
	// work is the Work of the executions view or of a Work log;
	// execution the execution of an execution log; event the event
	// whose chain is shown.
	work, execution, event string
	// selected is the id of the selected row.
	selected string
}

// key names the data a frame shows.
func (f frame) key() string {
	return fmt.Sprintf("%d/%s/%s/%s", f.view, f.work, f.execution, f.event)
}

// pending is an action waiting for the operator's confirmation.
type pending struct {
	prompt string
	// reason, when true, asks for a reason first (deny).
	reason bool
	run    func(ctx context.Context, reason string) (string, error)
}

// Messages.
type (
	tickMsg   struct{}
	actionMsg struct {
		text string
		err  error
	}
	logChunkMsg struct {
		gen  int
		data []byte
	}
	logEndMsg struct {
		gen int
		err error
	}
)

// Model is the TUI's bubbletea model.
type Model struct {
	o    Options
	c    *client.Client
	keys keyMap
	help help.Model

	width, height int
	showHelp      bool

	// cur is the current frame, back the frames Esc returns to.
	cur  frame
	back []frame

	data    table
	dataKey string
	dataErr error
	cursor  int

	health    string
	healthBad bool

	// fetching counts the view reads under way; asking is true while a
	// health read is.
	fetching int
	asking   bool
	// age is how long ago (in refresh intervals) the view was read.
	age time.Duration

	// status is the last action's result or refusal.
	status    string
	statusBad bool

	confirm *pending
	input   textinput.Model

	log       viewport.Model
	logBuf    []byte
	logGen    int
	logCancel context.CancelFunc
	logCh     chan []byte
	logState  string
}

// New returns the model; Options.Client is required.
func New(o Options) *Model {
	if o.Refresh <= 0 {
		o.Refresh = DefaultRefresh
	}
	if o.ApprovalsRefresh <= 0 {
		o.ApprovalsRefresh = DefaultApprovalsRefresh
	}
	o.ApprovalsRefresh = max(o.ApprovalsRefresh, o.Refresh)
	if o.Ticker == nil {
		o.Ticker = func(d time.Duration) tea.Cmd {
			return tea.Tick(d, func(time.Time) tea.Msg { return nil })
		}
	}
	if o.Reason == "" {
		o.Reason = "open-conduit tui"
	}
	ti := textinput.New()
	ti.Prompt = "reason: "
	ti.CharLimit = 200
	ti.Cursor.SetMode(cursor.CursorStatic)
	return &Model{o: o, c: o.Client, keys: newKeyMap(), help: help.New(), input: ti,
		width: 100, height: 30, log: viewport.New(100, 20), health: "daemon: asking…"}
}

// Init reads the first view and the daemon's health, and starts the
// refresh ticker.
func (m *Model) Init() tea.Cmd {
	return tea.Batch(m.refresh(), m.tick())
}

func (m *Model) tick() tea.Cmd {
	wait := m.o.Ticker(m.o.Refresh)
	if wait == nil {
		return nil
	}
	return func() tea.Msg {
		wait()
		return tickMsg{}
	}
}

// refresh reads the current view (unless it is a log, which follows its
// stream) and the health.
func (m *Model) refresh() tea.Cmd {
	if m.cur.view == viewLog {
		return m.askHealth()
	}
	return tea.Batch(m.askHealth(), m.fetch())
}

func (m *Model) fetch() tea.Cmd {
	m.fetching++
	m.age = 0
	return fetchCmd(m.c, m.cur)
}

func (m *Model) askHealth() tea.Cmd {
	m.asking = true
	return healthCmd(m.c)
}

// Update handles one message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.help.Width = msg.Width
		m.log.Width, m.log.Height = msg.Width, m.logHeight()
		return m, nil
	case tickMsg:
		// A read still under way is not asked again: a slow daemon gets
		// one request of each kind at a time.
		var cmds []tea.Cmd
		m.age += m.o.Refresh
		due := m.cur.view != viewApprovals || m.age >= m.o.ApprovalsRefresh
		if m.fetching == 0 && m.cur.view != viewLog && due {
			cmds = append(cmds, m.fetch())
		}
		if !m.asking {
			cmds = append(cmds, m.askHealth())
		}
		return m, tea.Batch(append(cmds, m.tick())...)
	case healthMsg:
		m.asking = false
		m.health, m.healthBad = describeHealth(msg)
		return m, nil
	case dataMsg:
		m.fetching--
		if msg.key != m.cur.key() {
			return m, nil
		}
		m.dataKey, m.dataErr = msg.key, msg.err
		if msg.err == nil {
			m.data = msg.table
			m.reselect()
		}
		return m, nil
	case actionMsg:
		if msg.err != nil {
			m.status, m.statusBad = "Refused: "+describe(msg.err), true
		} else {
			m.status, m.statusBad = msg.text, false
		}
		return m, m.refresh()
	case logChunkMsg:
		if msg.gen != m.logGen {
			return m, nil
		}
		m.appendLog(msg.data)
		return m, m.waitLog()
	case logEndMsg:
		if msg.gen != m.logGen {
			return m, nil
		}
		if msg.err != nil && !errors.Is(msg.err, context.Canceled) {
			m.logState = "the log stream failed: " + describe(msg.err)
		} else {
			m.logState = "the attempt ended; this is its whole log"
		}
		return m, nil
	case tea.KeyMsg:
		return m.key(msg)
	}
	if m.cur.view == viewLog {
		var cmd tea.Cmd
		m.log, cmd = m.log.Update(msg)
		return m, cmd
	}
	return m, nil
}

func (m *Model) key(msg tea.KeyMsg) (tea.Model, tea.Cmd) {
	k := m.keys
	if m.confirm != nil {
		p := m.confirm
		if p.reason {
			switch msg.Type {
			case tea.KeyEsc:
				m.confirm = nil
				m.status, m.statusBad = "Kept it: nothing was done.", false
				return m, nil
			case tea.KeyEnter:
				reason := strings.TrimSpace(m.input.Value())
				if reason == "" {
					m.status, m.statusBad = "A reason is needed: type it, then enter.", true
					return m, nil
				}
				m.confirm = nil
				return m, m.act(p, reason)
			}
			var cmd tea.Cmd
			m.input, cmd = m.input.Update(msg)
			return m, cmd
		}
		switch {
		case key.Matches(msg, k.Confirm):
			m.confirm = nil
			return m, m.act(p, m.o.Reason)
		case key.Matches(msg, k.Refuse), key.Matches(msg, k.Quit):
			m.confirm = nil
			m.status, m.statusBad = "Kept it: nothing was done.", false
		}
		return m, nil
	}
	switch {
	case key.Matches(msg, k.Quit):
		m.stopLog()
		return m, tea.Quit
	case key.Matches(msg, k.Help):
		m.showHelp = !m.showHelp
		m.help.ShowAll = m.showHelp
		return m, nil
	case key.Matches(msg, k.Refresh):
		return m, m.refresh()
	case key.Matches(msg, k.Work):
		return m, m.top(viewWork)
	case key.Matches(msg, k.Waits):
		return m, m.top(viewWaits)
	case key.Matches(msg, k.Events):
		return m, m.top(viewEvents)
	case key.Matches(msg, k.Approvals):
		return m, m.top(viewApprovals)
	case key.Matches(msg, k.Back):
		if m.showHelp {
			m.showHelp, m.help.ShowAll = false, false
			return m, nil
		}
		return m, m.pop()
	}
	if m.cur.view == viewLog {
		if key.Matches(msg, k.Cancel) && m.cur.execution != "" {
			m.ask(cancelExecution(m.c, m.cur.execution))
			return m, nil
		}
		var cmd tea.Cmd
		m.log, cmd = m.log.Update(msg)
		return m, cmd
	}
	switch {
	case key.Matches(msg, k.Up):
		if m.cursor > 0 {
			m.cursor--
		}
		m.cur.selected = m.selectedID()
	case key.Matches(msg, k.Down):
		if m.cursor < len(m.data.rows)-1 {
			m.cursor++
		}
		m.cur.selected = m.selectedID()
	case key.Matches(msg, k.PageStart):
		m.cursor = 0
		m.cur.selected = m.selectedID()
	case key.Matches(msg, k.Open):
		return m, m.open()
	case key.Matches(msg, k.Log):
		return m, m.openLog()
	case key.Matches(msg, k.Cancel), key.Matches(msg, k.Retry), key.Matches(msg, k.Wake),
		key.Matches(msg, k.Approve), key.Matches(msg, k.Deny):
		m.startAction(msg)
	}
	return m, nil
}

// selected is the selected row, if any.
func (m *Model) selected() (row, bool) {
	if m.dataKey != m.cur.key() || m.cursor < 0 || m.cursor >= len(m.data.rows) {
		return row{}, false
	}
	return m.data.rows[m.cursor], true
}

func (m *Model) selectedID() string {
	r, _ := m.selected()
	return r.id
}

// reselect keeps the selection on the same record across a refresh.
func (m *Model) reselect() {
	m.cursor = 0
	for i, r := range m.data.rows {
		if r.id == m.cur.selected {
			m.cursor = i
			return
		}
	}
	if m.cur.view == viewChain {
		for i, r := range m.data.rows {
			if r.id == m.cur.event {
				m.cursor = i
			}
		}
	}
	m.cur.selected = m.selectedID()
}

// show makes f the current frame and reads it.
func (m *Model) show(f frame) tea.Cmd {
	m.stopLog()
	m.cur = f
	m.data, m.dataKey, m.dataErr, m.cursor = table{}, "", nil, 0
	if f.view == viewLog {
		return tea.Batch(m.startLog(), m.askHealth())
	}
	return m.refresh()
}

func (m *Model) push(f frame) tea.Cmd {
	m.back = append(m.back, m.cur)
	return m.show(f)
}

func (m *Model) pop() tea.Cmd {
	if len(m.back) == 0 {
		return nil
	}
	f := m.back[len(m.back)-1]
	m.back = m.back[:len(m.back)-1]
	return m.show(f)
}

func (m *Model) top(v view) tea.Cmd {
	m.back = nil
	return m.show(frame{view: v})
}

// open goes into the selected row: a Work's executions, an execution's
// log, an event's causal chain, a wait's or approval's Work.
func (m *Model) open() tea.Cmd {
	r, ok := m.selected()
	if !ok {
		return nil
	}
	switch m.cur.view {
	case viewWork, viewWaits, viewApprovals:
		return m.push(frame{view: viewExecutions, work: r.work})
	case viewExecutions:
		return m.push(frame{view: viewLog, work: r.work, execution: r.id})
	case viewEvents, viewChain:
		if m.cur.view == viewChain && r.id == m.cur.event {
			return nil
		}
		return m.push(frame{view: viewChain, event: r.id})
	}
	return nil
}

// openLog follows the selected Work's log (across its attempts) or the
// selected execution's.
func (m *Model) openLog() tea.Cmd {
	r, ok := m.selected()
	if !ok {
		return nil
	}
	switch m.cur.view {
	case viewExecutions:
		return m.push(frame{view: viewLog, work: r.work, execution: r.id})
	case viewWork, viewWaits, viewApprovals:
		if r.work != "" {
			return m.push(frame{view: viewLog, work: r.work})
		}
	}
	return nil
}

// startAction asks to confirm the action key msg names on the selected
// row, or says why there is none.
func (m *Model) startAction(msg tea.KeyMsg) {
	k := m.keys
	r, ok := m.selected()
	if !ok {
		m.status, m.statusBad = "Nothing is selected.", true
		return
	}
	var p *pending
	switch m.cur.view {
	case viewWork, viewExecutions:
		work := r.work
		switch {
		case key.Matches(msg, k.Cancel) && m.cur.view == viewExecutions:
			p = cancelExecution(m.c, r.id)
		case key.Matches(msg, k.Cancel):
			p = &pending{prompt: "Cancel Work " + work + " and stop its attempt?", run: func(ctx context.Context, reason string) (string, error) {
				res, err := m.c.CancelWork(ctx, work, reason, nil)
				if err != nil {
					return "", err
				}
				return fmt.Sprintf("Cancelled Work %s: it is %s%s.", work, res.Work.State, existing(res.Existing)), nil
			}}
		case key.Matches(msg, k.Retry):
			p = &pending{prompt: "Retry (or release) Work " + work + "?", run: func(ctx context.Context, reason string) (string, error) {
				res, err := m.c.RetryWork(ctx, work, reason, nil)
				if err != nil {
					return "", err
				}
				return fmt.Sprintf("Retried Work %s: it is %s again%s.", work, res.Work.State, existing(res.Existing)), nil
			}}
		case key.Matches(msg, k.Wake):
			p = &pending{prompt: "Wake Work " + work + " (an event on its own key)?", run: func(ctx context.Context, _ string) (string, error) {
				res, err := m.c.WakeWork(ctx, work, client.WakeRequest{}, nil)
				if err != nil {
					return "", err
				}
				if res.Matched {
					return fmt.Sprintf("Woke Work %s: event %s satisfied its wait.", work, res.Event.ID), nil
				}
				return fmt.Sprintf("Sent event %s to Work %s: it matched no wait.", res.Event.ID, work), nil
			}}
		}
	case viewApprovals:
		id, scope, work := r.id, r.scope, r.work
		switch {
		case key.Matches(msg, k.Approve):
			p = &pending{prompt: "Approve " + id + " of Work " + work + "?", run: func(ctx context.Context, _ string) (string, error) {
				return decide(ctx, m.c, "human.approve", scope, map[string]string{"approval": id})
			}}
		case key.Matches(msg, k.Deny):
			p = &pending{prompt: "Deny " + id + " of Work " + work + "? Type the reason the held call fails with, enter denies, esc keeps it.", reason: true,
				run: func(ctx context.Context, reason string) (string, error) {
					return decide(ctx, m.c, "human.deny", scope, map[string]string{"approval": id, "reason": reason})
				}}
		}
	}
	if p == nil {
		m.status, m.statusBad = "That action does not apply here: press ? for what each view offers.", true
		return
	}
	m.ask(p)
}

func (m *Model) ask(p *pending) {
	m.confirm = p
	m.status, m.statusBad = "", false
	if p.reason {
		m.input.SetValue("")
		m.input.Focus()
	}
}

func cancelExecution(c *client.Client, id string) *pending {
	return &pending{prompt: "Cancel execution " + id + "? Its Work is held until a retry.", run: func(ctx context.Context, reason string) (string, error) {
		res, err := c.CancelExecution(ctx, id, reason, nil)
		if err != nil {
			return "", err
		}
		state := "stopping"
		if res.Execution != nil {
			state = res.Execution.State
		}
		work := "is " + res.Work.State
		if res.Work.BlockedReason != "" {
			work = "is held (" + res.Work.BlockedReason + ") until a retry"
		}
		return fmt.Sprintf("Cancelled execution %s: it is %s; Work %s %s%s.", id, state, res.Work.ID, work, existing(res.Existing)), nil
	}}
}

func existing(e bool) string {
	if e {
		return " (an earlier request did it)"
	}
	return ""
}

func decide(ctx context.Context, c *client.Client, action, scope string, in map[string]string) (string, error) {
	raw, _ := json.Marshal(in)
	res, err := c.Act(ctx, action, client.ActRequest{Scope: scope, Input: raw}, nil)
	if err != nil {
		return "", err
	}
	var body struct {
		Approval approval `json:"approval"`
	}
	if err := json.Unmarshal(res.Result, &body); err != nil {
		return "", errors.New("the human extension answered a decision that does not decode")
	}
	a := body.Approval
	return fmt.Sprintf("Approval %s of Work %s is %s by %s (event %s).", a.ID, a.Work, a.State, dash(a.Actor), res.Event.ID), nil
}

// act runs a confirmed action.
func (m *Model) act(p *pending, reason string) tea.Cmd {
	m.status, m.statusBad = "Working…", false
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		text, err := p.run(ctx, reason)
		return actionMsg{text: text, err: err}
	}
}

// describe renders an error for the status line: a refusal as its code
// and message, anything else as it says.
func describe(err error) string {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return ae.Code + ": " + ae.Message
	}
	return err.Error()
}

func describeHealth(h healthMsg) (string, bool) {
	if h.err != nil {
		return "daemon: " + describe(h.err), true
	}
	return fmt.Sprintf("daemon %s (%s) · version %s · config generation %d", h.health.State, h.health.Status, h.health.Version, h.health.Generation), h.health.State != "ready"
}

// ---- rendering ----

var (
	titleStyle    = lipgloss.NewStyle().Bold(true)
	headerStyle   = lipgloss.NewStyle().Bold(true).Underline(true)
	selectedStyle = lipgloss.NewStyle().Reverse(true)
	badStyle      = lipgloss.NewStyle().Foreground(lipgloss.Color("9"))
	dimStyle      = lipgloss.NewStyle().Faint(true)
	promptStyle   = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("11"))
)

// View renders the screen: a title, the view, then the prompt or the last
// action's result, the daemon's health and the keys.
func (m *Model) View() string {
	var b strings.Builder
	b.WriteString(m.line(titleStyle.Render("Open Conduit · "+m.title()) + dimStyle.Render(fmt.Sprintf("  (refreshed every %s)", m.interval()))))
	b.WriteByte('\n')
	if m.showHelp {
		b.WriteString(m.help.View(m.keys))
		b.WriteByte('\n')
	} else if m.cur.view == viewLog {
		b.WriteString(m.log.View())
		b.WriteByte('\n')
		b.WriteString(m.line(dimStyle.Render(m.logState)))
		b.WriteByte('\n')
	} else {
		b.WriteString(m.tableView())
	}
	b.WriteString(m.footer())
	return b.String()
}

func (m *Model) interval() time.Duration {
	if m.cur.view == viewApprovals {
		return m.o.ApprovalsRefresh
	}
	return m.o.Refresh
}

func (m *Model) title() string {
	switch m.cur.view {
	case viewLog:
		if m.cur.execution != "" {
			return "log of execution " + m.cur.execution
		}
		return "log of Work " + m.cur.work
	case viewExecutions:
		return "executions of Work " + m.cur.work
	case viewChain:
		return "causal chain of event " + m.cur.event
	}
	if m.data.title != "" {
		return m.data.title
	}
	return [...]string{"Work", "", "Waits", "Events", "", "Pending approvals"}[m.cur.view]
}

func (m *Model) line(s string) string { return lipgloss.NewStyle().MaxWidth(m.width).Render(s) }

// bodyHeight is the lines left for a view's body.
func (m *Model) bodyHeight() int {
	h := m.height - 6
	if h < 3 {
		h = 3
	}
	return h
}

func (m *Model) logHeight() int { return m.bodyHeight() - 1 }

func (m *Model) tableView() string {
	var b strings.Builder
	if m.dataErr != nil {
		b.WriteString(m.line(badStyle.Render("Cannot read this view: " + describe(m.dataErr))))
		b.WriteByte('\n')
	}
	if m.dataKey != m.cur.key() {
		if m.dataErr == nil {
			b.WriteString(m.line(dimStyle.Render("reading…")))
			b.WriteByte('\n')
		}
		return b.String()
	}
	t := m.data
	lines := 0
	if t.caption != "" {
		b.WriteString(m.line(t.caption))
		b.WriteByte('\n')
		lines++
	}
	widths := make([]int, len(t.header))
	for i, h := range t.header {
		widths[i] = lipgloss.Width(h)
	}
	for _, r := range t.rows {
		for i, c := range r.cells {
			if w := lipgloss.Width(c); i < len(widths) && w > widths[i] {
				widths[i] = min(w, 60)
			}
		}
	}
	render := func(cells []string) string {
		parts := make([]string, len(cells))
		for i, c := range cells {
			parts[i] = lipgloss.NewStyle().Width(widths[i]).MaxWidth(widths[i]).Render(c)
		}
		return strings.Join(parts, "  ")
	}
	b.WriteString(m.line(headerStyle.Render(render(t.header))))
	b.WriteByte('\n')
	lines++
	if len(t.rows) == 0 {
		b.WriteString(m.line(dimStyle.Render("(none)")))
		b.WriteByte('\n')
		return b.String()
	}
	room := m.bodyHeight() - lines
	start := 0
	if m.cursor >= room {
		start = m.cursor - room + 1
	}
	for i := start; i < len(t.rows) && i < start+room; i++ {
		s := render(t.rows[i].cells)
		if i == m.cursor {
			s = selectedStyle.Render(s)
		}
		b.WriteString(m.line(s))
		b.WriteByte('\n')
	}
	return b.String()
}

func (m *Model) footer() string {
	var b strings.Builder
	switch {
	case m.confirm != nil && m.confirm.reason:
		b.WriteString(m.line(promptStyle.Render(m.confirm.prompt)))
		b.WriteByte('\n')
		b.WriteString(m.line(m.input.View()))
		if m.statusBad {
			b.WriteByte('\n')
			b.WriteString(m.line(badStyle.Render(m.status)))
		}
	case m.confirm != nil:
		b.WriteString(m.line(promptStyle.Render(m.confirm.prompt + " y to confirm, n or esc to keep it")))
	case m.statusBad:
		b.WriteString(m.line(badStyle.Render(m.status)))
	default:
		b.WriteString(m.line(m.status))
	}
	b.WriteByte('\n')
	if m.healthBad {
		b.WriteString(m.line(badStyle.Render(m.health)))
	} else {
		b.WriteString(m.line(dimStyle.Render(m.health)))
	}
	b.WriteByte('\n')
	if !m.showHelp {
		b.WriteString(m.line(m.help.View(m.keys)))
	}
	return b.String()
}
