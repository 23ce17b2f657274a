package extension

import "testing"

func TestListenAndAPIURL(t *testing.T) {
	for s, want := range map[string][2]bool{ // valid, loopback
		"127.0.0.1:8787": {true, true}, "localhost:0": {true, true}, "[::1]:80": {true, true},
		"0.0.0.0:8787": {true, false}, ":8787": {true, false}, "10.0.0.1:65535": {true, false},
		"127.0.0.1:65536": {false, false}, "127.0.0.1:08": {false, false}, "example.com:80": {false, false}, "127.0.0.1": {false, false},
	} {
		if got := ValidListen(s); got != want[0] {
			t.Errorf("ValidListen(%q) = %v", s, got)
		}
		if want[0] {
			if got := LoopbackListen(s); got != want[1] {
				t.Errorf("LoopbackListen(%q) = %v", s, got)
			}
		}
	}
	for s, want := range map[string]bool{
		"https://api.github.com": true, "http://127.0.0.1:9/": true, "http://localhost/": true,
		"http://example.com/": false, "https://u:p@example.com/": false, "https://example.com/?q=1": false,
		"https://example.com/#f": false, "/relative": false, "ftp://example.com/": false,
	} {
		if got := APIURL(s); got != want {
			t.Errorf("APIURL(%q) = %v", s, got)
		}
	}
}
