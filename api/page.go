package api

// Page is the response shape of every list route. NextCursor is empty
// (and absent) on the last page; pass it back as the cursor query
// parameter, with the same filters, for the next page.
type Page[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// Page sizes of list routes: the limit query parameter defaults to
// DefaultPageSize and may not exceed MaxPageSize.
const (
	DefaultPageSize = 50
	MaxPageSize     = 500
)
