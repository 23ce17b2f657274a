package toolbeltapi_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
)

// raw is one HTTP exchange over a socket, sent exactly as given, so that
// tests can send what the client never would.
type raw struct {
	status int
	header http.Header
	body   []byte
}

func (r raw) code() string {
	var env struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	_ = json.Unmarshal(r.body, &env)
	return env.Error.Code
}

// rawClient speaks HTTP/1.1 over the socket with no help at all.
func rawClient(sock string) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", sock)
			},
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
