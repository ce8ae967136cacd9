package chunked

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/tierd/tierd/internal/privfile"
)

// Errors of keys.
var (
	// ErrKeyUnavailable marks (wrapped) a copy whose data key is wrapped
	// by a KEK this tierd does not have; the error names the KEK's id.
	ErrKeyUnavailable = errors.New("chunked: key-encryption key not available")
	// ErrWrongKey marks (wrapped) a wrapped data key that does not open
	// under the KEK of its id: another key under that id, or a wrapped
	// key taken from another copy or changed.
	ErrWrongKey = errors.New("chunked: data key does not open")
	// ErrBadMAC marks (wrapped) a manifest whose authentication (MAC)
	// or, not encrypted, whose digest fails.
	ErrBadMAC = errors.New("chunked: manifest authentication failed")
)

// KeyWrapper wraps and unwraps data keys under named key-encryption keys:
// a Keyring of files, or a KMS. Implementations are safe for concurrent
// use. aad binds a wrap to its copy (see the package doc); a KMS passes
// it as its encryption context where it has one.
type KeyWrapper interface {
	// Current names the KEK new copies are wrapped with.
	Current() string
	// Wrap wraps dataKey under the KEK kekID. Errors: ErrKeyUnavailable
	// (wrapped) for an unknown id, the KMS's.
	Wrap(ctx context.Context, kekID string, dataKey, aad []byte) ([]byte, error)
	// Unwrap opens wrapped under the KEK kekID. Errors: ErrKeyUnavailable
	// (wrapped) for an unknown id; ErrWrongKey (wrapped) when it does not
	// open; the KMS's.
	Unwrap(ctx context.Context, kekID string, wrapped, aad []byte) ([]byte, error)
}

// Keyring is a KeyWrapper over 32-byte AES-256 KEKs held in memory,
// read from files.
type Keyring struct {
	current string
	keys    map[string]cipher.AEAD
}

// LoadKeyring reads the KEKs files names (KEK id -> path) and makes
// current the one new copies use. A file holds the 32 bytes of the key,
// raw or as 64 hex digits (white space around them ignored); it must be
// owned by tierd's user or root, and readable or writable by nobody
// else. A KEK id is 1 to 64 of [A-Za-z0-9._-]. current "" makes a
// keyring that only reads (Wrap fails). Errors name the id and file,
// never a key's bytes.
func LoadKeyring(files map[string]string, current string) (*Keyring, error) {
	if _, ok := files[current]; !ok && current != "" {
		return nil, fmt.Errorf("encryption.key.id %q: not one of encryption.keys (%s)", current, strings.Join(slices.Sorted(mapsKeys(files)), ", "))
	}
	k := &Keyring{current: current, keys: map[string]cipher.AEAD{}}
	for id, p := range files {
		if err := checkKEKID(id); err != nil {
			return nil, err
		}
		key, err := readKEK(id, p)
		if err != nil {
			return nil, err
		}
		if k.keys[id], err = newGCM(key); err != nil {
			return nil, err
		}
	}
	return k, nil
}

// NewKeyring is a Keyring over keys given in memory (tests, tools).
func NewKeyring(keys map[string][]byte, current string) (*Keyring, error) {
	k := &Keyring{current: current, keys: map[string]cipher.AEAD{}}
	for id, key := range keys {
		if err := checkKEKID(id); err != nil {
			return nil, err
		}
		if len(key) != 32 {
			return nil, fmt.Errorf("encryption key %q: %d bytes, an AES-256 key is 32", id, len(key))
		}
		var err error
		if k.keys[id], err = newGCM(key); err != nil {
			return nil, err
		}
	}
	if _, ok := k.keys[current]; !ok && current != "" {
		return nil, fmt.Errorf("encryption.key.id %q: no such key", current)
	}
	return k, nil
}

func mapsKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// CheckKEKID checks a KEK id: 1 to 64 of A-Z a-z 0-9 . _ -.
func CheckKEKID(id string) error { return checkKEKID(id) }

func checkKEKID(id string) error {
	if id == "" || len(id) > 64 || strings.IndexFunc(id, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	}) >= 0 {
		return fmt.Errorf("encryption key id %q: must be 1 to 64 of A-Z a-z 0-9 . _ -", id)
	}
	return nil
}

func readKEK(id, p string) ([]byte, error) {
	return ReadKeyFile(fmt.Sprintf("encryption key %q", id), p)
}

// ReadKeyFile reads a 32-byte key from the file p, raw or as 64 hex
// digits (white space around them ignored), for what (a setting's name,
// in errors). The file must be owned by tierd's user or root and be
// readable or writable by nobody else (privfile.Check, and no group or
// other read). Errors name what and p, never the file's bytes.
func ReadKeyFile(what, p string) ([]byte, error) {
	// A FIFO or device would block the open or give endless bytes: only a
	// regular file (a symlink to one included) is read.
	if st, err := os.Stat(p); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %s is not a regular file (%v)", what, p, st.Mode().Type())
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %s is not a regular file (%v)", what, p, st.Mode().Type())
	}
	if err := privfile.Check(what, p, st); err != nil {
		return nil, err
	}
	if st.Mode().Perm()&0o044 != 0 {
		return nil, fmt.Errorf("%s: %s has mode %v: its group or other users may read it; chmod go-rwx %s", what, p, st.Mode().Perm(), p)
	}
	data := make([]byte, 130)
	n, _ := io.ReadFull(f, data)
	data = data[:n]
	if n == 32 && st.Size() == 32 {
		if printable(data) {
			// 32 random bytes are all printable once in 10^14: this is
			// text (a passphrase, 32 hex digits: 16 bytes of key).
			return nil, fmt.Errorf("%s: %s holds 32 characters of text, not 32 random bytes: a key file is 32 random bytes, or 64 hex digits (e.g. from: tierd keys new FILE, or openssl rand -hex 32)", what, p)
		}
		return data, nil
	}
	if t := bytes.TrimSpace(data); len(t) == 64 && st.Size() == int64(n) {
		if key, err := hex.DecodeString(string(t)); err == nil {
			return key, nil
		}
	}
	return nil, fmt.Errorf("%s: %s holds %d bytes: a key file is 32 bytes, or 64 hex digits (e.g. from: tierd keys new FILE, or openssl rand -hex 32)", what, p, st.Size())
}

// printable reports whether b is all printable ASCII or white space.
func printable(b []byte) bool {
	for _, c := range b {
		if (c < 0x20 || c > 0x7e) && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

func newGCM(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// Current names the KEK new copies use.
func (k *Keyring) Current() string { return k.current }

// IDs lists the KEKs held, sorted.
func (k *Keyring) IDs() []string {
	ids := make([]string, 0, len(k.keys))
	for id := range k.keys {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Wrap seals dataKey under KEK kekID (see the package doc).
func (k *Keyring) Wrap(_ context.Context, kekID string, dataKey, aad []byte) ([]byte, error) {
	a, ok := k.keys[kekID]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrKeyUnavailable, kekID)
	}
	nonce := make([]byte, 12, 12+len(dataKey)+16)
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return a.Seal(nonce, nonce, dataKey, aad), nil
}

// Unwrap opens a data key wrapped under KEK kekID.
func (k *Keyring) Unwrap(_ context.Context, kekID string, wrapped, aad []byte) ([]byte, error) {
	a, ok := k.keys[kekID]
	if !ok {
		return nil, fmt.Errorf("%w: %q (this tierd has %s)", ErrKeyUnavailable, kekID, strings.Join(k.IDs(), ", "))
	}
	if len(wrapped) < 12+16 {
		return nil, fmt.Errorf("%w: under %q: %d bytes, too short", ErrWrongKey, kekID, len(wrapped))
	}
	key, err := a.Open(nil, wrapped[:12], wrapped[12:], aad)
	if err != nil {
		return nil, fmt.Errorf("%w: under key-encryption key %q (another key under that id, or a wrapped key changed or from another copy)", ErrWrongKey, kekID)
	}
	return key, nil
}

// CopyKeys are one copy's keys, derived from its data key.
type CopyKeys struct {
	Sealer *Sealer
	mac    []byte
}

// NewDataKey returns 32 random bytes: a new copy's data key.
func NewDataKey() ([]byte, error) {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("chunked: data key: %w", err)
	}
	return k, nil
}

// WrapAAD is the additional data a copy's data key is wrapped with.
func WrapAAD(copyID string) []byte { return []byte("tierd/data-key/v1\x00" + copyID) }

// DeriveKeys derives the chunk key and manifest key of the copy copyID
// ("<topic>-<partition>/<segment id>") from its data key (see the package doc).
func DeriveKeys(dataKey []byte, copyID string) (*CopyKeys, error) {
	ck, err := hkdf.Key(sha256.New, dataKey, nil, "tierd/chunk-key/v1", 32)
	if err != nil {
		return nil, err
	}
	mk, err := hkdf.Key(sha256.New, dataKey, nil, "tierd/manifest-mac/v1", 32)
	if err != nil {
		return nil, err
	}
	a, err := newGCM(ck)
	if err != nil {
		return nil, err
	}
	return &CopyKeys{Sealer: &Sealer{aead: a, copyID: copyID}, mac: mk}, nil
}

// MAC returns the manifest MAC of canonical bytes, 64 lowercase hex digits.
func (k *CopyKeys) MAC(canonical []byte) string {
	h := hmac.New(sha256.New, k.mac)
	h.Write(canonical)
	return hex.EncodeToString(h.Sum(nil))
}

// CheckMAC compares mac with the MAC of canonical in constant time.
// Errors: ErrBadMAC (wrapped).
func (k *CopyKeys) CheckMAC(canonical []byte, mac string) error {
	got, err := hex.DecodeString(mac)
	h := hmac.New(sha256.New, k.mac)
	h.Write(canonical)
	if err != nil || !hmac.Equal(got, h.Sum(nil)) {
		return fmt.Errorf("%w: the manifest was changed, or replaced by another copy's", ErrBadMAC)
	}
	return nil
}
