package grpcapi

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
)

// TokenSet maps bearer tokens to principals by the SHA-256 of each token:
// it never holds a token itself. The zero value knows no token; Set
// replaces the whole set at once (a reload).
//
// Its file form (fetch.tokens_file), one token a line, '#' comments:
//
//	User:ops     sha256:<64 hex digits: SHA-256 of the token>
//	User:reader  sha256:<...>
//
// The principal is "<type>:<name>" as Kafka writes one; a principal may
// have several tokens (a rotation), a digest only one principal.
type TokenSet struct {
	byDigest atomic.Pointer[map[[sha256.Size]byte]string]
}

// Principal returns the principal of token, comparing digests in
// constant time.
func (t *TokenSet) Principal(token string) (string, bool) {
	m := t.byDigest.Load()
	if m == nil || token == "" {
		return "", false
	}
	d := sha256.Sum256([]byte(token))
	for k, who := range *m {
		if subtle.ConstantTimeCompare(k[:], d[:]) == 1 {
			return who, true
		}
	}
	return "", false
}

// Len is how many tokens the set knows.
func (t *TokenSet) Len() int {
	if m := t.byDigest.Load(); m != nil {
		return len(*m)
	}
	return 0
}

// Set replaces the set with the tokens of r (the file form above). A
// file that does not parse changes nothing; the error names its line,
// never a digest.
func (t *TokenSet) Set(r io.Reader) error {
	m := map[[sha256.Size]byte]string{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return fmt.Errorf("line %d: want \"<principal> sha256:<hex>\"", n)
		}
		if i := strings.IndexByte(f[0], ':'); i <= 0 || i == len(f[0])-1 {
			return fmt.Errorf("line %d: principal %q: want <type>:<name>, e.g. User:ops", n, f[0])
		}
		hx, ok := strings.CutPrefix(f[1], "sha256:")
		b, err := hex.DecodeString(hx)
		if !ok || err != nil || len(b) != sha256.Size {
			return fmt.Errorf("line %d: the digest is not sha256: and 64 hex digits (tierd api token makes a line)", n)
		}
		k := [sha256.Size]byte(b)
		if _, dup := m[k]; dup {
			return fmt.Errorf("line %d: the same token digest is on an earlier line", n)
		}
		m[k] = f[0]
	}
	if err := sc.Err(); err != nil {
		return err
	}
	t.byDigest.Store(&m)
	return nil
}

// TokenLine is the tokens file line of token for principal.
func TokenLine(principal, token string) string {
	d := sha256.Sum256([]byte(token))
	return principal + " sha256:" + hex.EncodeToString(d[:])
}
