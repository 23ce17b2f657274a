//go:build !linux

package logfollow

// newWatcher has no file events to offer here: Follow looks for appended
// data at every recheck instead.
func newWatcher(string) watcher { return noWatcher{} }
