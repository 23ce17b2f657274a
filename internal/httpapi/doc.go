// Package httpapi is the HTTP discipline both of the daemon's sockets
// share: strict request decoding (one JSON object, no nulls, no unknown
// fields, no stray query), the bearer credential's shape, ETags, the
// handler signature func(*http.Request) (any, error), rendering a
// handler's result, and the error envelope with the one function that maps
// an error (this package's, the extension sentinels, the kernel's and the
// toolbelt's refusals) to its status, code and message.
//
// It knows no route, credential store or domain rule. It must never put a
// token, a secret, a configured value or an error's own text into a
// response: an error that maps to no code is a 500 with a generic message,
// and its text goes only to the log.
package httpapi
