// Package slack is the first-party Slack extension. Its Events API ingress
// (an extension.Webhook, off unless its configuration turns it on) is
// served by the host at /slack/events on the daemon's one webhook
// listener; the extension's part of each request (Read) verifies every request's X-Slack-Signature (v0, HMAC-SHA256 of
// "v0:<timestamp>:<body>" under the signing secret, named in the
// configuration and resolved by the host) and refuses a timestamp more
// than five minutes from the injected clock, before it parses anything of
// the request. It answers Slack's url_verification challenge, and turns an
// app_mention or a message in a channel the configuration claims into a
// slack.app_mention or slack.message Event whose correlation key is the
// thread (<channel>:<thread root ts>), with the envelope's event_id as its
// delivery identity, so a retry is one Event.
//
// Its operations read the calling Work's own thread (slack.context,
// slack.thread), answer in it (slack.reply), post elsewhere in a channel
// the scope claims when a binding grants it (slack.post), and wait for the
// next message in the thread (slack.wait.reply, a translated wait). They
// call Slack's Web API through github.com/slack-go/slack with the bot
// token the configuration names, resolved through the ingress's host
// while the daemon runs the extension and kept in memory only; Slack's
// refusals and rate limits are stable OperationError codes.
//
// It imports only the public contracts (api, extension, extension/inproc)
// and the Slack client library. It must never log, store or answer the
// signing secret or the bot token, a body or a header value of a refused
// request; it never puts a header in an Event; and its configuration
// diagnostics and refusals never quote a configured value.
package slack
