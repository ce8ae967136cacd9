package rsmapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"unicode"
)

// MinTokenLength is the shortest token rsm.token_file may hold.
const MinTokenLength = 16

// tokenDigest is the SHA-256 of a token: requests are compared against
// it, so that the comparison takes the same time whatever the length or
// the content of what they carry.
type tokenDigest [sha256.Size]byte

// ReadToken reads a token file: one line, surrounding whitespace
// trimmed, at least MinTokenLength characters, no whitespace or control
// character inside, and a file that other users can neither read nor
// write (the token lets its holder copy and delete a broker's tiered
// data). Errors name the file and the rule, never the token.
func ReadToken(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("rsm: token_file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("rsm: token_file %s is not a regular file", path)
	}
	if perm := st.Mode().Perm(); perm&0o007 != 0 {
		return "", fmt.Errorf("rsm: token_file %s has mode %04o: other users may read or write it; chmod o-rwx it (0640 or 0600; "+
			"a Kubernetes secret volume: defaultMode 0440)", path, perm)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("rsm: token_file: %w", err)
	}
	tok := strings.TrimSpace(string(data))
	switch {
	case tok == "":
		return "", fmt.Errorf("rsm: token_file %s is empty", path)
	case strings.ContainsFunc(tok, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r > unicode.MaxASCII }):
		return "", fmt.Errorf("rsm: token_file %s holds more than one word, or a character that is not printable ASCII: the token is one line of one word", path)
	case len(tok) < MinTokenLength:
		return "", fmt.Errorf("rsm: token_file %s holds %d characters, fewer than %d (make one with: head -c 32 /dev/urandom | base64)", path, len(tok), MinTokenLength)
	}
	return tok, nil
}

// tokenHolder keeps the digest of the token in use; a reload replaces it.
type tokenHolder struct {
	path string
	cur  atomic.Pointer[tokenDigest]
}

// load reads the token file and puts its token in use. On an error the
// token in use (if any) stays.
func (h *tokenHolder) load() error {
	tok, err := ReadToken(h.path)
	if err != nil {
		return err
	}
	d := tokenDigest(sha256.Sum256([]byte(tok)))
	h.cur.Store(&d)
	return nil
}

// errNoToken and errWrongToken are the two ways a request fails
// authentication; neither says anything about the token.
var (
	errNoToken    = fmt.Errorf("%w: the request carries no bearer token (Authorization: Bearer <the content of rsm.token_file>)", ErrUnauthenticated)
	errWrongToken = fmt.Errorf("%w: the bearer token is not the one in rsm.token_file", ErrUnauthenticated)
)

// check reports whether r carries the token in use.
func (h *tokenHolder) check(r *http.Request) error {
	auth := r.Header.Get("Authorization")
	scheme, given, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(given) == "" {
		return errNoToken
	}
	want := h.cur.Load()
	got := sha256.Sum256([]byte(strings.TrimSpace(given)))
	if want == nil || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		return errWrongToken
	}
	return nil
}

// authFailure names a failure for the metric's label.
func authFailure(err error) string {
	if errors.Is(err, errNoToken) {
		return "missing"
	}
	return "wrong"
}
