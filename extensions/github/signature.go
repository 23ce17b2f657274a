package github

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// SignatureHeader is the header GitHub signs a delivery in.
const SignatureHeader = "X-Hub-Signature-256"

// signaturePrefix names the algorithm, the only one accepted.
const signaturePrefix = "sha256="

// Why a signature is refused (the reason logged and counted, never the
// header's value).
const (
	reasonSignatureMissing   = "signature_missing"
	reasonSignatureMalformed = "signature_malformed"
	reasonSignatureMismatch  = "signature_mismatch"
)

// verify checks header, a delivery's X-Hub-Signature-256, against the
// HMAC-SHA256 of body under secret, in constant time. It returns "" when
// the signature holds, else the reason it does not.
func verify(secret []byte, body []byte, header string) string {
	if header == "" {
		return reasonSignatureMissing
	}
	hexSig, ok := strings.CutPrefix(header, signaturePrefix)
	if !ok || len(hexSig) != 2*sha256.Size {
		return reasonSignatureMalformed
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return reasonSignatureMalformed
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return reasonSignatureMismatch
	}
	return ""
}

// Sign returns the X-Hub-Signature-256 value GitHub would send for body
// under secret (for tests and tools that send deliveries).
func Sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return signaturePrefix + hex.EncodeToString(mac.Sum(nil))
}
