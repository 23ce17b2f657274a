// Package wire converts coordination storage's records and the kernel's
// results into the public wire types of package api, field by field. It is
// the one copy of these conversions: the management routes and the
// toolbelt's read_context both answer through it, so that a storage column
// rename never changes either socket's JSON and no digest or secret can
// reach a response by a forgotten tag (the api types have no such field).
//
// It only copies fields: it must never read storage, decide anything,
// encode JSON, or give a wire type a field that holds a token, a digest, a
// secret or an executor's config.
package wire
