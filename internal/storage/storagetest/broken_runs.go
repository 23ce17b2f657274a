package storagetest

import (
	"context"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// historyIgnoresBinding lists executions of every binding when a binding
// is asked for.
var historyIgnoresBinding = stateless("history_ignores_binding", "an execution list asked for one binding lists every binding's",
	func(s storage.Store) storage.Store { return anyBinding{s} })

type anyBinding struct{ storage.Store }

func (s anyBinding) ListExecutions(ctx context.Context, p *storage.ListExecutionsParams) ([]storage.Execution, error) {
	q := *p
	q.Binding = ""
	return s.Store.ListExecutions(ctx, &q)
}
