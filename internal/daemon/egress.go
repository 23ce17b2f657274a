package daemon

import (
	"context"

	"github.com/open-conduit/open-conduit/internal/egress"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// egressPolicy is the egress proxy's Policy: a connection is allowed while
// the execution is live and the binding's egress in the ACTIVE generation
// (not the one the attempt is pinned to) names host:port within its scope's
// ceiling, asked at every connection like the toolbelt's ceiling, so an
// apply that removes a host refuses the next connection.
func (d *Daemon) egressPolicy(ctx context.Context, executionID, host string, port int) (egress.Decision, error) {
	exe, err := d.store.GetExecution(ctx, executionID)
	switch {
	case storage.IsNotFound(err):
		return egress.Decision{Reason: storage.EgressNotLive}, nil
	case err != nil:
		return egress.Decision{}, err
	case !exe.Live():
		return egress.Decision{Reason: storage.EgressNotLive}, nil
	}
	if d.cfg.Active().AllowEgress(exe.Scope, exe.Binding, host, port) {
		return egress.Decision{Allowed: true}, nil
	}
	return egress.Decision{Reason: storage.EgressNotAllowed, Where: "/scopes/" + pointerToken(exe.Scope) + "/bindings/" + pointerToken(exe.Binding) + "/egress"}, nil
}

// pointerToken escapes a JSON pointer reference token (RFC 6901).
func pointerToken(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '~':
			out = append(out, '~', '0')
		case '/':
			out = append(out, '~', '1')
		default:
			out = append(out, s[i])
		}
	}
	return string(out)
}
