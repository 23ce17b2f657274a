package configsvc

import (
	"context"
	"errors"

	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// SetRequest changes one member of the active configuration.
type SetRequest struct {
	// Pointer is an RFC 6901 pointer into the configuration document as
	// written (the pointers of diagnostics and warnings).
	Pointer string
	// Value is the member's new value, one JSON value.
	Value []byte
	// ExpectedGeneration must be the active generation's number.
	ExpectedGeneration int64
	// Actor is who sets it (operator:<name>).
	Actor string
	// Retry is ApplyRequest.Retry.
	Retry bool
}

// Set changes one member of the document of the expected generation (the
// document as written and saved privately, secret references and all: never
// the redacted form GET /v1/config shows) and publishes the result through
// Apply: the same validation, expected generation, atomic save and publish.
// A pointer SetMember refuses is ErrBadPointer, whose message names only
// the safe part of the pointer and never the value.
func (s *Service) Set(ctx context.Context, req SetRequest) (ApplyResult, error) {
	cur := s.active.Load()
	if cur == nil {
		return ApplyResult{}, errors.New("configsvc: Set before Restore")
	}
	// A retry of a set whose generation committed reads the document it
	// changed, so that Apply recognises the very same result.
	if req.ExpectedGeneration != cur.gen.Number && !(req.Retry && cur.gen.Number == req.ExpectedGeneration+1) {
		return ApplyResult{}, staleGeneration(req.ExpectedGeneration)
	}
	g, err := s.opts.Store.GetGeneration(ctx, req.ExpectedGeneration)
	if errors.Is(err, storage.ErrNotFound) {
		return ApplyResult{}, staleGeneration(req.ExpectedGeneration)
	}
	if err != nil {
		return ApplyResult{}, err
	}
	data, err := s.readDocument(g.Hash)
	if err != nil {
		return ApplyResult{}, err
	}
	doc, err := config.SetMember(data, req.Pointer, req.Value)
	var pe *config.PointerError
	if errors.As(err, &pe) {
		return ApplyResult{}, &Refusal{Kind: ErrBadPointer, Message: pe.Message}
	}
	if err != nil {
		return ApplyResult{}, err
	}
	return s.Apply(ctx, ApplyRequest{Config: doc, ExpectedGeneration: req.ExpectedGeneration, Actor: req.Actor, Retry: req.Retry})
}
