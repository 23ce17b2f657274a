// Package webhook is the daemon's one webhook listener: an HTTP listener
// on a TCP address (loopback unless the configuration allows more) that
// serves every running webhook ingress (extension.Webhook) at its own
// path, and the plumbing every delivery goes through around the
// ingress's own reading of it: POST only, a bound on the deliveries read
// at once and on a body's size, the signing secret resolved through the
// ingress's host, a bounded queue in front of the host's Accept, the
// answer, and a count and a log line for every outcome.
//
// It must never log or answer a body, a header's value, a secret or an
// error's text that could hold one, and it never reads storage: an Event
// reaches the kernel only through the ingress's extension.IngressHost.
package webhook
