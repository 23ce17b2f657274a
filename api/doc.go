// Package api holds the wire types of Open Conduit's two sockets: every
// JSON request and response body of the management API (docs/api.md) and
// of an execution's toolbelt socket (docs/toolbelt.md), the error envelope
// they share, and every stable error code either socket, the kernel or the
// toolbelt answers or records, with its HTTP status where that is fixed.
//
// The server converts its storage records and results into these types
// field by field, so a storage column rename never changes the API; the
// clients (client, osclient) decode into them. The types carry only JSON
// tags and small read-only helpers: no behaviour, no I/O.
//
// The management socket encodes them with go-json-experiment/json, whose
// omitempty leaves out only an empty string, null, [] and {}: a zero
// number or false is still sent (ToolbeltCall's epoch and replayed), and
// a nil list is sent as []. The toolbelt's call results are encoded with
// encoding/json.
//
// It must never hold a digest, a secret, a secret reference or a
// configured value, and never import anything but the standard library.
// The one credential it carries is Issued.Token: the operator token shown
// exactly once, in the response that issues it. (A git.credential
// operation's result is a secret, so it is osclient's, not a type here.)
package api
