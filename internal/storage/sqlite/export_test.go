package sqlite

import "database/sql"

// RawForTest opens the file with the driver alone, without migrations, so a
// test can shape what a later release would have written.
func RawForTest(path string) (*sql.DB, error) { return sql.Open(driverName, path) }
