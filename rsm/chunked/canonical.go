package chunked

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Canonical returns the canonical bytes of a manifest's JSON for its MAC
// or digest (see the package doc): its members but "mac", "digest" and
// "encryption", sorted,
// compacted. Members a reader does not know are covered as well, so a
// newer writer's additions are authenticated too. Errors: not a JSON
// object.
func Canonical(manifest []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(manifest, &m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	delete(m, "mac")
	delete(m, "digest")
	delete(m, "encryption")
	return json.Marshal(m)
}

// Digest returns the digest of an unencrypted chunked copy's manifest,
// the SHA-256 of its canonical bytes in 64 lowercase hex digits: it finds
// damage, not an edit by whoever can write the bucket (only the keys of
// an encrypted copy can).
func Digest(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}

// CheckDigest compares digest with the Digest of canonical. Errors:
// ErrBadMAC (wrapped).
func CheckDigest(canonical []byte, digest string) error {
	if Digest(canonical) != digest {
		return fmt.Errorf("%w: the manifest's digest does not match its contents (damaged or edited)", ErrBadMAC)
	}
	return nil
}

// SetMembers returns manifest with the given top-level members replaced
// (or added), every other member's bytes as they were: how a MAC is
// added after the fact and how a re-wrap replaces the envelope. Errors:
// not a JSON object, a value that is not JSON.
func SetMembers(manifest []byte, members map[string]any) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(manifest, &m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	for k, v := range members {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		m[k] = b
	}
	return json.MarshalIndent(m, "", "  ")
}
