package config

import (
	"errors"

	gokeyring "github.com/zalando/go-keyring"
)

// Keyring reads an item from a keyring. SystemKeyring is the platform's;
// tests inject their own.
type Keyring interface {
	// Get returns the secret stored for service and user, or an error
	// wrapping ErrKeyringNotFound when there is none. Any other error means
	// the keyring could not be asked.
	Get(service, user string) (string, error)
}

// ErrKeyringNotFound: the keyring has no item for the service and user.
var ErrKeyringNotFound = errors.New("keyring: item not found")

// SystemKeyring is the platform keyring (the Secret Service over D-Bus on
// Linux, the Keychain on macOS), through github.com/zalando/go-keyring.
type SystemKeyring struct{}

// Get reads an item from the platform keyring.
func (SystemKeyring) Get(service, user string) (string, error) {
	v, err := gokeyring.Get(service, user)
	if errors.Is(err, gokeyring.ErrNotFound) {
		return "", ErrKeyringNotFound
	}
	return v, err
}
