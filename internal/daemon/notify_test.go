package daemon

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// The notifier writes one datagram of lines to a path or an abstract
// socket, nothing without a socket, and refuses a relative name without
// echoing it.
func TestNotifier(t *testing.T) {
	if err := (notifier{}).notify("READY=1"); err != nil {
		t.Fatalf("without a socket: %v", err)
	}
	abstract := fmt.Sprintf("@open-conduit-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	for _, name := range []string{shortDir(t) + ".sock", abstract} {
		addr := name
		if strings.HasPrefix(name, "@") {
			addr = "\x00" + name[1:]
		}
		conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: addr, Net: "unixgram"})
		if err != nil {
			t.Fatal(err)
		}
		if err := (notifier{name}).notify("READY=1", "STATUS=ready"); err != nil {
			t.Fatalf("notify %s: %v", name, err)
		}
		buf := make([]byte, 256)
		conn.SetReadDeadline(time.Now().Add(guard))
		n, err := conn.Read(buf)
		conn.Close()
		if err != nil || string(buf[:n]) != "READY=1\nSTATUS=ready\n" {
			t.Fatalf("%s received %q, %v", name, buf[:n], err)
		}
		if !strings.HasPrefix(name, "@") {
			os.Remove(name)
		}
	}
	if err := (notifier{"relative/notify.sock"}).notify("READY=1"); err == nil || strings.Contains(err.Error(), "relative") {
		t.Fatalf("a relative socket name: %v, want a refusal that does not echo it", err)
	}
	if err := (notifier{"/nonexistent/notify.sock"}).notify("READY=1"); err == nil || strings.Contains(err.Error(), "nonexistent") {
		t.Fatalf("a missing socket: %v, want a failure that does not echo its path", err)
	}
}
