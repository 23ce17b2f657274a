// Package introspectport adapts the daemon's coordination storage and its
// configuration to the introspection extension's Port, so that the
// extension reads the records it serves without knowing the store.
//
// It only reads: it must never write to storage, and never list anything
// without the scope and the Work (or causal root) a query names, so that a
// query the extension leaves unfiltered by mistake answers nothing instead
// of a whole scope.
package introspectport

import (
	"context"
	"errors"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/extensions/introspection"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/wire"
)

// Port is the introspection extension's port over storage.
type Port struct {
	// Store is read outside any transaction.
	Store storage.Reader
	// Reads is the scope's current read ceiling (the same check
	// read_context makes).
	Reads func(scope, read string) bool
}

var _ introspection.Port = (*Port)(nil)

// errUnfiltered refuses a list that names no scope or no Work (or root).
var errUnfiltered = errors.New("introspectport: a list names its scope and its Work")

func page(after *introspection.Position, limit int) storage.Page {
	p := storage.Page{Limit: limit}
	if after != nil {
		p.After = &storage.Position{CreatedAt: after.CreatedAt, ID: after.ID}
	}
	return p
}

// Work returns a Work.
func (p *Port) Work(ctx context.Context, id string) (api.Work, error) {
	w, err := p.Store.GetWork(ctx, id)
	if err != nil {
		return api.Work{}, err
	}
	return wire.Work(w), nil
}

// Children lists the Work whose parent is q.Work.
func (p *Port) Children(ctx context.Context, q introspection.ListQuery) ([]api.Work, error) {
	if q.Scope == "" || q.Work == "" {
		return nil, errUnfiltered
	}
	rows, err := p.Store.ListWork(ctx, &storage.ListWorkParams{Scope: q.Scope, Parent: q.Work, Page: page(q.After, q.Limit)})
	return convert(rows, err, wire.Work)
}

// Event returns an Event.
func (p *Port) Event(ctx context.Context, id string) (api.Event, error) {
	e, err := p.Store.GetEvent(ctx, id)
	if err != nil {
		return api.Event{}, err
	}
	return wire.Event(e), nil
}

// Events lists Events by Work or causal root.
func (p *Port) Events(ctx context.Context, q introspection.EventQuery) ([]api.Event, error) {
	if q.Scope == "" || q.Work == "" && q.Root == "" {
		return nil, errUnfiltered
	}
	rows, err := p.Store.ListEvents(ctx, &storage.ListEventsParams{
		Scope: q.Scope, Work: q.Work, Root: q.Root, Type: q.Type, AfterSeq: q.AfterSeq, Limit: q.Limit,
	})
	return convert(rows, err, wire.Event)
}

// Executions lists a Work's executions.
func (p *Port) Executions(ctx context.Context, q introspection.ListQuery) ([]api.Execution, error) {
	if q.Scope == "" || q.Work == "" {
		return nil, errUnfiltered
	}
	rows, err := p.Store.ListExecutions(ctx, &storage.ListExecutionsParams{Scope: q.Scope, Work: q.Work, Page: page(q.After, q.Limit)})
	return convert(rows, err, wire.Execution)
}

// Waits lists a Work's waits.
func (p *Port) Waits(ctx context.Context, q introspection.ListQuery) ([]api.Wait, error) {
	if q.Scope == "" || q.Work == "" {
		return nil, errUnfiltered
	}
	rows, err := p.Store.ListWaits(ctx, &storage.ListWaitsParams{Scope: q.Scope, Work: q.Work, State: storage.WaitState(q.State), Page: page(q.After, q.Limit)})
	return convert(rows, err, wire.Wait)
}

// AuthorizeRead asks the read ceiling.
func (p *Port) AuthorizeRead(scope, read string) bool { return p.Reads(scope, read) }

func convert[T, U any](rows []T, err error, out func(T) U) ([]U, error) {
	if err != nil {
		return nil, err
	}
	items := make([]U, 0, len(rows))
	for _, r := range rows {
		items = append(items, out(r))
	}
	return items, nil
}
