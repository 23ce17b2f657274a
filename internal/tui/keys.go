package tui

import "github.com/charmbracelet/bubbles/key"

// keyMap holds every key the TUI answers; the help view lists them.
type keyMap struct {
	Up, Down, Open, Back, Log        key.Binding
	Work, Waits, Events, Approvals   key.Binding
	Cancel, Retry, Wake              key.Binding
	Approve, Deny, Refresh, Help     key.Binding
	Quit, Confirm, Refuse, PageStart key.Binding
}

func newKeyMap() keyMap {
	return keyMap{
		Up:        key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down:      key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		PageStart: key.NewBinding(key.WithKeys("home", "g"), key.WithHelp("g", "first row")),
		Open:      key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "open: executions, log, causal chain")),
		Back:      key.NewBinding(key.WithKeys("esc", "backspace"), key.WithHelp("esc", "back")),
		Log:       key.NewBinding(key.WithKeys("l"), key.WithHelp("l", "follow the log")),
		Work:      key.NewBinding(key.WithKeys("1"), key.WithHelp("1", "Work")),
		Waits:     key.NewBinding(key.WithKeys("2"), key.WithHelp("2", "waits")),
		Events:    key.NewBinding(key.WithKeys("3"), key.WithHelp("3", "events")),
		Approvals: key.NewBinding(key.WithKeys("4"), key.WithHelp("4", "approvals")),
		Cancel:    key.NewBinding(key.WithKeys("c"), key.WithHelp("c", "cancel Work or execution")),
		Retry:     key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "retry or release Work")),
		Wake:      key.NewBinding(key.WithKeys("w"), key.WithHelp("w", "wake Work")),
		Approve:   key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "approve")),
		Deny:      key.NewBinding(key.WithKeys("d"), key.WithHelp("d", "deny (asks a reason)")),
		Refresh:   key.NewBinding(key.WithKeys("ctrl+r", "f5"), key.WithHelp("ctrl+r", "refresh now")),
		Help:      key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "all keys")),
		Quit:      key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
		Confirm:   key.NewBinding(key.WithKeys("y"), key.WithHelp("y", "confirm")),
		Refuse:    key.NewBinding(key.WithKeys("n", "esc"), key.WithHelp("n/esc", "keep it")),
	}
}

// ShortHelp is the one-line help under every view.
func (k keyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Open, k.Back, k.Work, k.Waits, k.Events, k.Approvals, k.Help, k.Quit}
}

// FullHelp is the keyboard help view, by column.
func (k keyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Up, k.Down, k.PageStart, k.Open, k.Back, k.Log},
		{k.Work, k.Waits, k.Events, k.Approvals, k.Refresh},
		{k.Cancel, k.Retry, k.Wake, k.Approve, k.Deny},
		{k.Confirm, k.Refuse, k.Help, k.Quit},
	}
}
