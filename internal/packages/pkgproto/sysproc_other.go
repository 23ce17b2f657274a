//go:build !linux

package pkgproto

import "syscall"

// sysProcAttr puts a package's process in a group of its own. Without a
// parent-death signal here, a package exits when its stdin reaches end of
// file (the protocol asks it to).
func sysProcAttr(bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
