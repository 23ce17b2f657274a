package config

import (
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Egress allowlists. A binding's egress lists the host:port pairs an
// execution of it may reach through the daemon's egress proxy; a scope's
// authorization.egress, when present, is a ceiling every binding of the
// scope and of its descendants stays within (absent, the parent's rule
// applies, and a root without one sets no ceiling). An entry is
//
//	host:port          a lower-case DNS name, or an IPv4 literal, and a port 1-65535
//	[v6]:port          an IPv6 literal in brackets
//	*.example.com:443  any name strictly below example.com (not example.com itself;
//	                   the domain has two labels at least)
//
// Nothing else: no scheme, no path, no port range, no bare "*".

// maxEgressEntries bounds one egress list.
const maxEgressEntries = 256

// EgressEntry is one parsed allowlist entry.
type EgressEntry struct {
	// Host is a lower-case DNS name, an IP literal without brackets, or,
	// with Wildcard, the domain below which every name matches.
	Host     string
	Wildcard bool
	Port     int
}

// String renders the entry as it is written.
func (e EgressEntry) String() string {
	h := e.Host
	if e.Wildcard {
		h = "*." + h
	} else if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	return h + ":" + strconv.Itoa(e.Port)
}

// Allows reports whether the entry allows host:port. host is compared as
// the proxy received it, lower-cased; an IP literal matches only an equal
// literal entry.
func (e EgressEntry) Allows(host string, port int) bool {
	if port != e.Port {
		return false
	}
	host = strings.ToLower(host)
	if !e.Wildcard {
		if a, err := netip.ParseAddr(host); err == nil {
			b, err := netip.ParseAddr(e.Host)
			return err == nil && a.Unmap() == b.Unmap()
		}
		return host == e.Host
	}
	prefix, ok := strings.CutSuffix(host, "."+e.Host)
	return ok && prefix != "" && validLabels(strings.Split(prefix, "."))
}

// within reports whether every pair e allows is one c allows.
func (e EgressEntry) within(c EgressEntry) bool {
	if e.Port != c.Port {
		return false
	}
	if !c.Wildcard {
		return !e.Wildcard && c.Allows(e.Host, e.Port)
	}
	if e.Wildcard {
		return e.Host == c.Host || strings.HasSuffix(e.Host, "."+c.Host)
	}
	return c.Allows(e.Host, e.Port)
}

var hostLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

var allDigits = regexp.MustCompile(`^[0-9]+$`)

// validHostname: dot-separated labels of lower-case letters, digits and
// '-', at most 253 bytes, the last not all digits (so that nothing shaped
// like an address is read as a name).
func validHostname(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	labels := strings.Split(h, ".")
	return validLabels(labels) && !allDigits.MatchString(labels[len(labels)-1])
}

func validLabels(labels []string) bool {
	for _, l := range labels {
		if !hostLabel.MatchString(l) {
			return false
		}
	}
	return true
}

// ParseEgressEntry parses one entry; it reports false for anything that is
// not exactly one of the shapes above.
func ParseEgressEntry(s string) (EgressEntry, bool) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 {
		return EgressEntry{}, false
	}
	host, portText := s[:i], s[i+1:]
	if !wholeNumber.MatchString(portText) || strings.HasPrefix(portText, "-") {
		return EgressEntry{}, false
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1 || port > 65535 {
		return EgressEntry{}, false
	}
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		a, err := netip.ParseAddr(host[1 : len(host)-1])
		if err != nil || !a.Is6() || a.Zone() != "" {
			return EgressEntry{}, false
		}
		return EgressEntry{Host: a.String(), Port: port}, true
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if !a.Is4() {
			return EgressEntry{}, false // an IPv6 literal goes in brackets
		}
		return EgressEntry{Host: a.String(), Port: port}, a.String() == host
	}
	if d, ok := strings.CutPrefix(host, "*."); ok {
		// A wildcard names a domain of two labels at least: never "*.com".
		if !validHostname(d) || !strings.Contains(d, ".") {
			return EgressEntry{}, false
		}
		return EgressEntry{Host: d, Wildcard: true, Port: port}, true
	}
	if !validHostname(host) {
		return EgressEntry{}, false
	}
	return EgressEntry{Host: host, Port: port}, true
}

const remedyEgress = `an egress entry is "host:port": a lower-case host name, an IPv4 address or a bracketed IPv6 address, or "*.domain" for every name below domain, then a port from 1 to 65535 (such as "api.example.com:443")`

// egressList reads an egress allowlist, reporting every element that is
// not an entry. It reports whether the list is known exactly.
func (s *schema) egressList(n *node) ([]egressItem, bool) {
	items := s.strings(n)
	ok := n.kind == kindArray && len(items) == len(n.elems)
	if len(n.elems) > maxEgressEntries {
		s.add(n.path(), CodeInvalidValue, "an egress list holds at most "+strconv.Itoa(maxEgressEntries)+" entries: use a wildcard or split the work across bindings")
		return nil, false
	}
	var out []egressItem
	for _, it := range items {
		e, valid := ParseEgressEntry(it.s)
		if !valid {
			s.add(n.elems[it.idx].path(), CodeInvalidValue, remedyEgress)
			ok = false
			continue
		}
		out = append(out, egressItem{idx: it.idx, entry: e})
	}
	return out, ok
}

// egressItem is an entry and its index in the array.
type egressItem struct {
	idx   int
	entry EgressEntry
}

// egressCeiling is a scope's egress rule: the entries its bindings stay
// within when restricted.
type egressCeiling struct {
	restricted bool
	entries    []EgressEntry
	// clean: the entries are known exactly, so a child's can be checked.
	clean bool
}

func (c egressCeiling) allows(e EgressEntry) bool {
	if !c.restricted {
		return true
	}
	return slices.ContainsFunc(c.entries, e.within)
}

// egressOf resolves a scope's authorization.egress inside its parent's
// (computed first): absent, the parent's; present, its entries, each within
// the parent's.
func (v *validator) egressOf(sc *docScope, base []step) egressCeiling {
	parent, known := egressCeiling{clean: true}, true
	if sc.parentSet {
		parent, known = v.egress[sc.parent], v.status[sc.id] == ancestryOK
	}
	if !sc.egressSet {
		if !known {
			return egressCeiling{}
		}
		return parent
	}
	c := egressCeiling{restricted: true, entries: []EgressEntry{}, clean: sc.egressOK && known}
	for _, it := range sc.egress {
		if known && parent.restricted && parent.clean && !parent.allows(it.entry) {
			v.add(append(slices.Clone(base), keyStep("egress"), idxStep(it.idx)), CodeAuthorityWidening,
				"the parent scope's authorization.egress does not allow this entry: remove it here, or add it (or a wildcard covering it) to the parent's first")
			c.clean = false
			continue
		}
		c.entries = append(c.entries, it.entry)
	}
	return c
}

// bindingEgress narrows a binding's egress to its scope's ceiling,
// reporting every entry outside it.
func (v *validator) bindingEgress(sc *docScope, b *docBinding, base []step) []EgressEntry {
	c := v.egress[sc.id]
	out := []EgressEntry{}
	for _, it := range b.egress {
		if c.restricted && c.clean && !c.allows(it.entry) {
			v.add(append(slices.Clone(base), keyStep("egress"), idxStep(it.idx)), CodeAuthorityWidening,
				"the scope's authorization.egress does not allow this entry: remove it here, or add it (or a wildcard covering it) to the scope's authorization.egress first")
			continue
		}
		if !slices.Contains(out, it.entry) {
			out = append(out, it.entry)
		}
	}
	return out
}

// AllowEgress reports whether an execution of the binding may open a
// connection to host:port now: the scope is active, the binding exists,
// its egress names the pair, and the scope's ceiling (a valid snapshot's
// bindings are within it) allows it too.
func (s *Snapshot) AllowEgress(scopeID, bindingID, host string, port int) bool {
	sc, ok := s.scopes[scopeID]
	if !ok || !sc.Active {
		return false
	}
	b, ok := sc.Bindings[bindingID]
	if !ok {
		return false
	}
	allowed := func(e EgressEntry) bool { return e.Allows(host, port) }
	if !slices.ContainsFunc(b.Egress, allowed) {
		return false
	}
	return !sc.EgressRestricted || slices.ContainsFunc(sc.Egress, allowed)
}

// egressStrings renders parsed entries in their normalized form.
func egressStrings(items []egressItem) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.entry.String()
	}
	return out
}
