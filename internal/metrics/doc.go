// Package metrics is the daemon's Prometheus instrumentation: one
// registry the daemon injects (never the client library's global
// default), the counters and histogram the parts report into through
// small methods, the Work gauges computed from storage at every scrape,
// and the HTTP handler that serves them in the text exposition format.
//
// It imports nothing of the module: the scheduler, the toolbelt, storage
// and the servers report through hooks of their own that the daemon
// connects here. Label values are bounded sets (states, results, codes,
// operation names the daemon knows), never ids, scopes, bindings or
// anything a caller chose, so a metric can never name a secret, a token
// or a configured value, and a hostile caller cannot grow the series.
// It must never log or expose an id, a token, a secret or a request body.
package metrics
