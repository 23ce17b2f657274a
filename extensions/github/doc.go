// Package github is the first-party GitHub extension. Its webhook ingress
// (an extension.Webhook, off unless its configuration turns it on) is
// served by the host at /github/webhook on the daemon's one webhook
// listener; the extension's part of each delivery (Read) verifies every delivery's X-Hub-Signature-256 against the webhook secret
// (named in the configuration, resolved by the host) before it reads
// anything of the delivery, maps a verified delivery to a namespaced Event
// (github.<event>[.<action>]) with a correlation key and a bounded subset
// of its payload, and offers it to the host in the scope the
// configuration gives its repository or installation, with the delivery's
// X-GitHub-Delivery as its delivery identity.
//
// Its operations are ghapi's (GitHub's REST API and github.git.credential),
// served with the credential its configuration names (a GitHub App's id and
// private key, or a token, each a secret resolved through the host while
// the daemon runs the extension, kept in memory only) and allowed only on
// the repositories the calling scope claims; the translated waits
// (github.wait.*: a pull request's checks, a review, a comment, merged or
// closed), declared like wait on the ingress's Events; the translated
// emission github.report; and the role toolsets and playbooks.
//
// It imports only the public contracts (extension, extension/inproc), its
// own ghapi and the standard library. It must never log, store or answer
// the webhook secret, the App's private key, an installation token or a
// token, a request body or a header value of a refused delivery; it never
// puts a header in an Event; and its configuration diagnostics and
// refusals never quote a configured value.
package github
