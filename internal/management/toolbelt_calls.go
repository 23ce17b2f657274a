package management

import (
	"net/http"

	"github.com/open-conduit/open-conduit/internal/httpapi"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// toolbeltCallFilters are the filters of GET /v1/toolbelt/calls.
type toolbeltCallFilters struct {
	Execution string `json:"execution"`
	Kind      string `json:"kind"`
	Result    string `json:"result"`
}

// listToolbeltCalls serves GET /v1/toolbelt/calls: the toolbelt's call
// records (toolbelt.called and toolbelt.rejected with their result), by
// time. A record never holds a token, a digest or an input value.
func (rs *Resources) listToolbeltCalls(r *http.Request) (any, error) {
	q, limit, cursor, err := listQuery(r, "execution", "kind", "result")
	if err != nil {
		return nil, err
	}
	f := toolbeltCallFilters{Execution: q.Get("execution"), Kind: q.Get("kind"), Result: q.Get("result")}
	if f.Kind != "" && f.Kind != storage.ToolbeltCalled && f.Kind != storage.ToolbeltRejected {
		return nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "kind must be %s or %s", storage.ToolbeltCalled, storage.ToolbeltRejected)
	}
	ctx := r.Context()
	page, err := pageByCreated(rs.cursors, r, f, limit, cursor, func(p storage.Page) ([]storage.ToolbeltCall, error) {
		return rs.store.ListToolbeltCalls(ctx, &storage.ListToolbeltCallsParams{Execution: f.Execution, Kind: f.Kind, Result: f.Result, Page: p})
	}, func(c storage.ToolbeltCall) storage.Position { return storage.Position{CreatedAt: c.At, ID: c.ID} })
	return listOut(page, err, toolbeltCallOut)
}
