// Package ghapi is the GitHub extension's side of GitHub's REST API: the
// credentials the extension calls GitHub with (a GitHub App, whose
// installation tokens it mints on demand and keeps only in memory, or a
// plain token) and the github.* operations an agent calls through the
// toolbelt (issues, pull requests, reviews, check runs, file contents,
// merge, and github.git.credential, which serves the git.credential
// capability that `os git-credential` asks for).
//
// It must never store, log, answer or put in an error a credential: the
// App's private key, an App JWT, an installation token or a plain token
// (only github.git.credential's result holds a token, and that operation
// is sensitive, so the host never records it). A refusal it answers is an
// *extension.OperationError with a stable code (see the Code constants)
// whose message never carries a response body from GitHub or a configured
// value. Time is injected (Options.Now, AppOptions.Now); GitHub's own
// answers, never a wall clock, decide rate limits. It imports only the
// public packages api and extension of the module.
//
// With a request ID, what an operation creates on GitHub (a comment, a
// pull request, a review) ends with an HTML comment marking the execution
// and the request ID, and a run again with the same ID answers what
// carries that mark instead of creating it twice (see DedupeRecent).
//
// # Wiring it into the extension
//
// The extension package (extensions/github) registers these operations
// with a few lines. At start, with the secrets its configuration names
// resolved:
//
//	creds, err := ghapi.NewApp(ghapi.AppOptions{
//		AppID: appID, PrivateKey: pem, // values from the secret resolver
//		BaseURL: cfg.APIURL,           // "" for github.com; "https://HOST/api/v3/" for GitHub Enterprise Server
//		Now: now, Logger: logger,
//	})
//	// or: creds := ghapi.StaticToken(token)
//	ops, err := ghapi.Operations(ghapi.Options{
//		Credentials: creds,
//		BaseURL:     cfg.APIURL,
//		Now:         now,
//		// Allow says whether a call of this Work may touch repo
//		// ("owner/repo", lower case): fill it from the scope's config
//		// (auth.Scope, auth.Config). nil refuses every repository.
//		Allow: func(auth extension.Authority, repo string) bool { ... },
//		// WorkRepository names the Work's own repository, used by
//		// github.git.credential when git sends no path. Optional.
//		WorkRepository: func(auth extension.Authority) (string, bool) { ... },
//	})
//
// and returns ops from its Operations method (inproc.Operator). With nil
// Credentials the operations are registered for their names only (the
// offline configuration check, the operations reference) and every call
// is refused with github_not_configured. github.pr.merge must stay out of
// the extension's default toolsets: InDefaultToolsets says which
// operations may join them.
package ghapi
