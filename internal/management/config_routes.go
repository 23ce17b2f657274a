package management

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/configsvc"
	"github.com/open-conduit/open-conduit/internal/httpapi"
)

// The configuration routes: get (the active generation, redacted),
// validate, apply and set (one member).

func (rs *Resources) getConfig(r *http.Request) (any, error) {
	if err := httpapi.NoQuery(r); err != nil {
		return nil, err
	}
	g, ok := rs.config.ActiveGeneration()
	if !ok {
		return nil, fmt.Errorf("management: no configuration is active")
	}
	return httpapi.Tagged(fmt.Sprintf("config/%d/%s", g.Number, g.Hash), configOut(g)), nil
}

// ConfigBody is the body of POST /v1/config/validate.
type ConfigBody struct {
	Config jsontext.Value `json:"config"`
}

func configDocument(v jsontext.Value) ([]byte, error) {
	if v == nil {
		return nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "config is required: the configuration document as a JSON object")
	}
	if v.Kind() != '{' {
		return nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "config must be a JSON object (the configuration document)")
	}
	// Saved for people to read: indented, unless that would take it past
	// the configuration's size limit.
	doc := jsontext.Value(append([]byte(nil), v...))
	if err := doc.Indent(jsontext.WithIndent("  ")); err != nil {
		return nil, httpapi.Wrap(httpapi.CodeInvalidRequest, err, "config is not valid JSON")
	}
	if len(doc)+1 > config.MaxSize {
		doc = append(doc[:0], v...)
	}
	return append(doc, '\n'), nil
}

func (rs *Resources) validateConfig(r *http.Request) (any, error) {
	var body ConfigBody
	if err := httpapi.DecodeBody(r, &body); err != nil {
		return nil, err
	}
	doc, err := configDocument(body.Config)
	if err != nil {
		return nil, err
	}
	snap, res, err := rs.config.ValidateStored(r.Context(), doc)
	if err != nil {
		return nil, err
	}
	return validationOut(snap, res), nil
}

// ApplyBody is the body of POST /v1/config/apply.
type ApplyBody struct {
	Config jsontext.Value `json:"config"`
	// ExpectedGeneration must be the active generation (GET /v1/config).
	ExpectedGeneration int64 `json:"expected_generation"`
	// Hash, when sent, must be the configuration's hash (as validate
	// returned it).
	Hash string `json:"hash,omitempty"`
}

func (rs *Resources) applyConfig(r *http.Request) (any, error) {
	var body ApplyBody
	if err := httpapi.DecodeBody(r, &body); err != nil {
		return nil, err
	}
	if body.ExpectedGeneration < 1 {
		return nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "expected_generation is required: the active generation, as GET /v1/config returns it")
	}
	doc, err := configDocument(body.Config)
	if err != nil {
		return nil, err
	}
	_, p := actorContext(r)
	// The route is idempotent: a retry under the same key whose first
	// attempt committed but was never recorded completes that apply.
	_, retry := IdempotencyKey(r.Context())
	res, err := rs.config.Apply(recordApplied(r), configsvc.ApplyRequest{Config: doc, ExpectedGeneration: body.ExpectedGeneration, ExpectedHash: body.Hash, Actor: p.Actor(), Retry: retry})
	if err != nil {
		return nil, configErr(err)
	}
	return appliedOut(res), nil
}

// SetBody is the body of POST /v1/config/set.
type SetBody struct {
	// Pointer is an RFC 6901 pointer into the configuration document.
	Pointer string `json:"pointer"`
	// Value is the member's new value.
	Value jsontext.Value `json:"value"`
	// ExpectedGeneration must be the active generation (GET /v1/config).
	ExpectedGeneration int64 `json:"expected_generation"`
}

func (rs *Resources) setConfig(r *http.Request) (any, error) {
	var body SetBody
	if err := httpapi.DecodeBody(r, &body); err != nil {
		return nil, err
	}
	if body.ExpectedGeneration < 1 {
		return nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "expected_generation is required: the active generation, as GET /v1/config returns it")
	}
	if body.Value == nil {
		return nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "value is required: the member's new value, as JSON")
	}
	_, p := actorContext(r)
	_, retry := IdempotencyKey(r.Context())
	res, err := rs.config.Set(recordApplied(r), configsvc.SetRequest{Pointer: body.Pointer, Value: body.Value, ExpectedGeneration: body.ExpectedGeneration, Actor: p.Actor(), Retry: retry})
	if err != nil {
		return nil, configErr(err)
	}
	return appliedOut(res), nil
}

// recordApplied is recordInTx for an apply or a set: the generation's
// own transaction records the Idempotency-Key response, answered with
// appliedOut as the handlers answer it.
func recordApplied(r *http.Request) context.Context {
	return recordInTx(r.Context(), r, func(v any) (any, bool) {
		res, ok := v.(configsvc.ApplyResult)
		return appliedOut(res), ok
	})
}

// configCodes are the codes of the configuration service's refusals.
var configCodes = []struct {
	kind error
	code httpapi.Code
}{
	{configsvc.ErrStaleGeneration, httpapi.CodeStaleGeneration},
	{configsvc.ErrScopeInUse, httpapi.CodeScopeInUse},
	{configsvc.ErrHashMismatch, httpapi.CodeConflict},
	{configsvc.ErrInvalidConfig, httpapi.CodeInvalidConfig},
	{configsvc.ErrBadPointer, httpapi.CodeInvalidRequest},
}

// configErr gives a refusal of the configuration service its code, keeping
// its message (written from generation numbers and scope ids only) and its
// diagnostics. The service knows no HTTP; this is the one place its
// refusals become codes.
func configErr(err error) error {
	var re *configsvc.Refusal
	if !errors.As(err, &re) {
		return err
	}
	for _, c := range configCodes {
		if errors.Is(re.Kind, c.kind) {
			e := httpapi.Wrap(c.code, err, re.Message)
			if re.Diagnostics != nil {
				e.Diagnostics = diagnosticsOut(re.Diagnostics)
			}
			return e
		}
	}
	return err
}
