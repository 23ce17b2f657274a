package management

import (
	"net/http"

	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/wire"
)

// egressFilters are what a cursor of GET /v1/executions/{id}/egress is
// bound to.
type egressFilters struct {
	Execution string `json:"execution"`
}

// listEgress serves GET /v1/executions/{id}/egress: the connections the
// execution opened, or tried to open, through the egress proxy, oldest
// first. A record holds where it went and the bytes each way, never what
// went through.
func (rs *Resources) listEgress(r *http.Request) (any, error) {
	_, limit, cursor, err := listQuery(r)
	if err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	ctx := r.Context()
	if _, err := rs.store.GetExecution(ctx, id); err != nil {
		return nil, notFound(err, "execution", id)
	}
	f := egressFilters{Execution: id}
	page, err := pageByCreated(rs.cursors, r, f, limit, cursor, func(p storage.Page) ([]storage.EgressConnection, error) {
		return rs.store.ListEgressConnections(ctx, &storage.ListEgressParams{Execution: id, Page: p})
	}, func(c storage.EgressConnection) storage.Position {
		return storage.Position{CreatedAt: c.StartedAt, ID: c.ID}
	})
	return listOut(page, err, wire.EgressConnection)
}
