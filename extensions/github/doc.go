// Package github is the first-party GitHub extension. So far it is its
// webhook ingress: an HTTP listener, off unless its configuration turns it
// on, that verifies every delivery's X-Hub-Signature-256 against the
// webhook secret (named in the configuration, resolved by the host) before
// it reads anything of the delivery, maps a verified delivery to a
// namespaced Event (github.<event>[.<action>]) with a correlation key and
// a bounded subset of its payload, and offers it to the host in the scope
// the configuration gives its repository or installation, with the
// delivery's X-GitHub-Delivery as its delivery identity.
//
// It imports only the public contracts (extension, extension/inproc) and
// the standard library. It must never log, store or answer the webhook
// secret, a request body or a header value of a refused delivery; it
// never puts a header in an Event; and its configuration diagnostics never
// quote a configured value.
package github
