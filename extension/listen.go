package extension

import (
	"net"
	"net/url"
	"strconv"
)

// ValidListen reports whether s is a listener's address: host:port, the
// host an IP address, localhost or empty (every interface) and the port 0
// to 65535. The daemon's webhook listener and the ingresses' deprecated
// own addresses are checked by it.
func ValidListen(s string) bool {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return false
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 || strconv.Itoa(n) != port {
		return false
	}
	return host == "localhost" || host == "" || net.ParseIP(host) != nil
}

// LoopbackListen reports whether a valid listen address is loopback only.
func LoopbackListen(s string) bool {
	host, _, _ := net.SplitHostPort(s)
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// APIURL reports whether s is an acceptable base URL of an outside
// service's API: absolute https (or http to a loopback host, such as a
// test's fake), without credentials, query or fragment.
func APIURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return false
	}
	switch u.Scheme {
	case "https":
		return true
	case "http":
		h := u.Hostname()
		ip := net.ParseIP(h)
		return h == "localhost" || ip != nil && ip.IsLoopback()
	}
	return false
}
