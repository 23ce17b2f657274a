package config

import "testing"

// BenchmarkValidate measures a full validation of the base configuration:
// parse, schema, meaning, snapshot and warnings.
func BenchmarkValidate(b *testing.B) {
	reg := testRegistry(b)
	data := []byte(baseConfig)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, res := Validate(data, reg); !res.Valid() {
			b.Fatal(res.Diagnostics)
		}
	}
}

// BenchmarkValidateInvalid measures the several-errors configuration.
func BenchmarkValidateInvalid(b *testing.B) {
	reg := testRegistry(b)
	data := encode(b, severalErrors(b))
	for b.Loop() {
		if _, res := Validate(data, reg); res.Valid() {
			b.Fatal("valid")
		}
	}
}
