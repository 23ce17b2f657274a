package sqlite

import (
	"errors"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// driverName is the pure Go driver registered by modernc.org/sqlite.
const driverName = "sqlite"

// isConstraint reports whether err is a uniqueness or primary key
// violation. Every write checks the rows it could collide with first (the
// single writer makes that race-free); this is the backstop at the driver
// edge.
func isConstraint(err error) bool {
	var se *msqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return true
		}
	}
	return extraConstraint != nil && extraConstraint(err)
}

// extraConstraint recognises another driver's constraint errors (set by the
// driver comparison benchmark's build).
var extraConstraint func(error) bool
