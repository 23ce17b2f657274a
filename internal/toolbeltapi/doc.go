// Package toolbeltapi is the HTTP face of an execution's own toolbelt
// socket: POST /v1/toolbelt/call, GET /v1/toolbelt/guidance and GET
// /v1/toolbelt/serving, decoded strictly and answered through the shared
// discipline of package httpapi. What a call may do is the toolbelt's
// decision (extension.Toolbelt); whether a bearer token is an operator's
// is asked of a port (Operators).
//
// It must never serve a route of the management socket, accept an
// operator credential, answer a refusal of authority with more than its
// bare code, or put a token, a digest or a secret into a response or a log
// line. It holds no SQL and knows nothing of the management server.
package toolbeltapi
