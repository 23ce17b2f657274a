package runs

// SocketPath returns the toolbelt socket path Prepare would give the
// execution, creating nothing: the path in its run directory, or the
// short-path fallback when that would pass MaxSocketPath bytes. The error
// wraps ErrEndpointUnavailable when neither fits. `open-conduit doctor`
// asks it, so that it judges socket paths by the rule Prepare enforces.
func (d *Dirs) SocketPath(executionID string) (string, error) {
	if err := checkExecutionID(executionID); err != nil {
		return "", err
	}
	return d.socketPath(Key(executionID), false)
}
