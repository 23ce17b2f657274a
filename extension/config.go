package extension

import "fmt"

// ConfigError lists the problems an extension found in its own
// configuration (Registration.CheckConfig). Validation reports each one as
// a diagnostic at /extensions/<name>/config followed by its Pointer.
type ConfigError struct {
	Problems []ConfigProblem
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("extension config: %d problems", len(e.Problems))
}

// ConfigProblem is one problem of an extension's configuration. Pointer is
// an RFC 6901 pointer relative to the config ("" for the config itself);
// Code is a configuration diagnostic code (unknown_field, wrong_type,
// missing_field, null_value, duplicate_key, invalid_value; any other is
// reported as invalid_value); Remedy says what to do and never quotes a
// configured value.
type ConfigProblem struct {
	Pointer string
	Code    string
	Remedy  string
}
