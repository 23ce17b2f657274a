package reaper

import "golang.org/x/sys/unix"

// BecomeSubreaper makes orphaned descendants of the calling process its
// children (PR_SET_CHILD_SUBREAPER), so that it can reap every process it
// started, not only its direct children.
func BecomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}
