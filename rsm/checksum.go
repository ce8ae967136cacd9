package rsm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"hash/crc32"
)

// castagnoli is the CRC-32C polynomial's table; hash/crc32 computes it
// with the CPU's CRC instructions where there are some (SSE 4.2, ARMv8).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crc32cHex formats a CRC-32C as the manifest records it: 8 lowercase
// hex digits, most significant first (the value's big-endian bytes, the
// order S3's x-amz-checksum-crc32c encodes in base64).
func crc32cHex(sum uint32) string { return fmt.Sprintf("%08x", sum) }

// isLowerHex reports whether s is n lowercase hex digits.
func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// checkObjectSums checks the checksums one object of a manifest of format
// version v records (see the package doc): version 1 objects carry
// "sha256" (64 lowercase hex digits), version 2 objects "crc32c" (8); a
// checksum of the other kind, where present, must be well-formed too
// (both are then verified). The error names the object and the checksum
// missing or malformed; ReadManifest wraps it in ErrBadManifest.
func checkObjectSums(v int, suffix string, o ObjectInfo) error {
	switch {
	case o.CRC32C == "" && o.SHA256 == "":
		return fmt.Errorf("object %s records no checksum (neither crc32c nor sha256), so its bytes cannot be verified", suffix)
	case o.CRC32C != "" && !isLowerHex(o.CRC32C, 8):
		return fmt.Errorf("object %s: crc32c %q is not 8 lowercase hex digits", suffix, o.CRC32C)
	case o.SHA256 != "" && !isLowerHex(o.SHA256, 2*sha256.Size):
		return fmt.Errorf("object %s: sha256 %q is not 64 lowercase hex digits", suffix, o.SHA256)
	case v == 1 && o.SHA256 == "":
		return fmt.Errorf("object %s records no sha256 (a format version 1 manifest checksums every object with SHA-256)", suffix)
	case v >= 2 && o.CRC32C == "":
		return fmt.Errorf("object %s records no crc32c (a format version %d manifest checksums every object with CRC-32C)", suffix, v)
	}
	return nil
}

// objectSums computes, as bytes are written to it, every checksum an
// ObjectInfo records, to compare with them at the end.
type objectSums struct {
	crc hash.Hash32 // nil when the object records no crc32c
	sha hash.Hash   // nil when the object records no sha256
}

// newObjectSums returns the checksums to compute for o. Errors:
// ErrBadManifest (wrapped) when o records none.
func newObjectSums(o ObjectInfo) (*objectSums, error) {
	s := &objectSums{}
	if o.CRC32C != "" {
		s.crc = crc32.New(castagnoli)
	}
	if o.SHA256 != "" {
		s.sha = sha256.New()
	}
	if s.crc == nil && s.sha == nil {
		return nil, fmt.Errorf("%w: object %s records no checksum (neither crc32c nor sha256), so its bytes cannot be verified", ErrBadManifest, o.Key)
	}
	return s, nil
}

// Write adds p to every checksum; it never fails.
func (s *objectSums) Write(p []byte) (int, error) {
	if s.crc != nil {
		s.crc.Write(p)
	}
	if s.sha != nil {
		s.sha.Write(p)
	}
	return len(p), nil
}

// match reports whether the bytes written have o's checksums.
func (s *objectSums) match(o ObjectInfo) bool {
	if s.crc != nil && crc32cHex(s.crc.Sum32()) != o.CRC32C {
		return false
	}
	return s.sha == nil || hex.EncodeToString(s.sha.Sum(nil)) == o.SHA256
}
