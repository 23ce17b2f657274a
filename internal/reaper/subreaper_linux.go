package reaper

import "golang.org/x/sys/unix"

// becomeSubreaper makes orphaned descendants this process's children.
func becomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}
