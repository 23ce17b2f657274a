package daemon

import (
	"errors"
	"fmt"
	"net"
	"strings"
)

// notifier speaks the service manager's readiness protocol (sd_notify):
// one datagram of newline-separated KEY=VALUE lines to the unixgram
// socket NOTIFY_SOCKET names (a leading @ is the abstract namespace).
// Without a socket it does nothing. A send that fails is logged by the
// caller and changes nothing else: readiness is the service manager's
// concern, the daemon serves either way.
type notifier struct{ socket string }

func (n notifier) notify(lines ...string) error {
	if n.socket == "" {
		return nil
	}
	name := n.socket
	if strings.HasPrefix(name, "@") {
		name = "\x00" + name[1:]
	} else if !strings.HasPrefix(name, "/") {
		return fmt.Errorf("NOTIFY_SOCKET is neither an absolute path nor an abstract socket name (@…)")
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("cannot reach the service manager's NOTIFY_SOCKET: %w", bare(err))
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(strings.Join(lines, "\n") + "\n")); err != nil {
		return fmt.Errorf("cannot notify the service manager: %w", bare(err))
	}
	return nil
}

// bare is a network error without the address it names.
func bare(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err
	}
	return err
}

// notify sends lines to the service manager, logging a failure.
func (d *Daemon) notify(lines ...string) {
	if err := (notifier{d.opts.NotifySocket}).notify(lines...); err != nil {
		d.log.Warn("service manager notification failed", "error", err.Error())
	}
}
