package toolbeltapi

import (
	"encoding/json"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/extension"
)

// The toolbelt's results in the wire types of package api, field by field.

// CallOut is the 200 body of POST /v1/toolbelt/call.
func CallOut(res extension.CallResult) api.CallResponse {
	return api.CallResponse{Operation: res.Operation, Result: res.Result, Replayed: res.Replayed}
}

// GuidanceOut is the body of GET /v1/toolbelt/guidance: every list sent,
// and {"type":"object"} for an operation that declares no schema.
func GuidanceOut(g extension.Guidance) api.Guidance {
	out := api.Guidance{Guidance: g.Guidance, Operations: []api.Operation{}}
	for _, op := range g.Operations {
		caps := op.Capabilities
		if caps == nil {
			caps = []string{}
		}
		schema := op.InputSchema
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		out.Operations = append(out.Operations, api.Operation{Name: op.Name, Summary: op.Summary, InputSchema: schema, Guidance: op.Guidance, Capabilities: caps})
	}
	return out
}

// ServingOut is the body of GET /v1/toolbelt/serving: an empty list, never
// null, when nothing serves the capability.
func ServingOut(capability string, ops []string) api.Serving {
	if ops == nil {
		ops = []string{}
	}
	return api.Serving{Capability: capability, Operations: ops}
}
