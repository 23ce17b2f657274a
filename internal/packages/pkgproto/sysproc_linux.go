package pkgproto

import "syscall"

// sysProcAttr puts a package's process in a group of its own and has the
// kernel signal it when the daemon's thread that started it dies (the
// daemon was killed): SIGKILL, or SIGTERM for a wrapping subreaper, which
// then kills and reaps what the package left.
func sysProcAttr(wrapped bool) *syscall.SysProcAttr {
	sig := syscall.SIGKILL
	if wrapped {
		sig = syscall.SIGTERM
	}
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: sig}
}
