package sasl

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"
)

// Mechanism names, as Kafka's sasl.enabled.mechanisms names them.
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
)

// Kafka's bounds on a SCRAM credential's iterations (ScramMechanism).
const (
	MinIterations = 4096
	MaxIterations = 16384
)

// ErrSyntax marks a bad line of a credentials file.
var ErrSyntax = errors.New("sasl: credentials file syntax")

// Credential is one SCRAM credential as Kafka stores it: the salt, the
// stored key H(ClientKey) and the server key (RFC 5802 section 3), and
// the iteration count.
type Credential struct {
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int
}

// Credentials are SCRAM credentials by user and mechanism. Immutable once
// built.
type Credentials struct {
	byUser map[string]map[string]Credential
	shapes map[string]shape // by mechanism: its credentials' commonest
}

// shape is what a server-first message shows of a credential: its salt
// length, bytes, and its iterations.
type shape struct{ saltLen, iterations int }

// defaultShape is NewCredential's: for a mechanism the file holds no
// credential of.
var defaultShape = shape{32, MinIterations}

// shapeOf returns the commonest salt length and iterations of the
// credentials of mechanism (ties to the smaller), for an unknown user's
// made-up credential to look like the known users'.
func (c *Credentials) shapeOf(mechanism string) shape {
	if c == nil {
		return defaultShape
	}
	if sh, ok := c.shapes[mechanism]; ok {
		return sh
	}
	return defaultShape
}

func (c *Credentials) findShapes() {
	counts := map[string]map[shape]int{}
	for _, byMech := range c.byUser {
		for m, cr := range byMech {
			if counts[m] == nil {
				counts[m] = map[shape]int{}
			}
			counts[m][shape{len(cr.Salt), cr.Iterations}]++
		}
	}
	c.shapes = map[string]shape{}
	for m, cs := range counts {
		best, n := shape{}, 0
		for sh, k := range cs {
			if k > n || k == n && (sh.iterations < best.iterations || sh.iterations == best.iterations && sh.saltLen < best.saltLen) {
				best, n = sh, k
			}
		}
		c.shapes[m] = best
	}
}

// Len returns how many credentials c holds.
func (c *Credentials) Len() int {
	if c == nil {
		return 0
	}
	n := 0
	for _, m := range c.byUser {
		n += len(m)
	}
	return n
}

func (c *Credentials) get(user, mechanism string) (Credential, bool) {
	if c == nil {
		return Credential{}, false
	}
	cr, ok := c.byUser[user][mechanism]
	return cr, ok
}

func hashOf(mechanism string) (name string, h func() hash.Hash, ok bool) {
	switch mechanism {
	case ScramSHA256:
		return mechanism, sha256.New, true
	case ScramSHA512:
		return mechanism, sha512.New, true
	}
	return "", nil, false
}

// NewCredential makes the SCRAM credential of password for mechanism
// (SCRAM-SHA-256 or SCRAM-SHA-512) with a fresh 32-byte salt, as Kafka's
// ScramFormatter does (the password's UTF-8 bytes, no SASLprep). Errors:
// an unknown mechanism, iterations outside Kafka's bounds.
func NewCredential(mechanism, password string, iterations int) (Credential, error) {
	_, h, ok := hashOf(mechanism)
	if !ok {
		return Credential{}, fmt.Errorf("sasl: %q is not a SCRAM mechanism (%s or %s)", mechanism, ScramSHA256, ScramSHA512)
	}
	if iterations < MinIterations || iterations > MaxIterations {
		return Credential{}, fmt.Errorf("sasl: iterations %d outside Kafka's %d-%d", iterations, MinIterations, MaxIterations)
	}
	salt := make([]byte, 32)
	if _, err := rand.Read(salt); err != nil {
		return Credential{}, err
	}
	stored, server, err := scramKeys(h, password, salt, iterations)
	if err != nil {
		return Credential{}, err
	}
	return Credential{Salt: salt, StoredKey: stored, ServerKey: server, Iterations: iterations}, nil
}

// FormatLine is the credentials file's line of user's credential c for
// mechanism.
func FormatLine(user, mechanism string, c Credential) string {
	enc := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("%s %s salt=%s,stored_key=%s,server_key=%s,iterations=%d", user, mechanism,
		enc(c.Salt), enc(c.StoredKey), enc(c.ServerKey), c.Iterations)
}

// ParseCredentials reads a credentials file (doc.go). Errors: every bad
// line by its number (errors.Is ErrSyntax), and r's; nothing is returned
// then. Secrets never appear in the errors.
func ParseCredentials(r io.Reader) (*Credentials, error) {
	c := &Credentials{byUser: map[string]map[string]Credential{}}
	sc := bufio.NewScanner(r)
	var errs []error
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		f := strings.Fields(s)
		if len(f) != 3 {
			errs = append(errs, fmt.Errorf("line %d: %w: want <user> <mechanism> <credential>, %d fields", line, ErrSyntax, len(f)))
			continue
		}
		user, mech := f[0], strings.ToUpper(f[1])
		_, h, ok := hashOf(mech)
		if !ok {
			errs = append(errs, fmt.Errorf("line %d: %w: mechanism %q (want %s or %s)", line, ErrSyntax, f[1], ScramSHA256, ScramSHA512))
			continue
		}
		cr, err := parseCredential(f[2], h().Size())
		if err != nil {
			errs = append(errs, fmt.Errorf("line %d (user %s, %s): %w", line, user, mech, err))
			continue
		}
		if _, dup := c.byUser[user][mech]; dup {
			errs = append(errs, fmt.Errorf("line %d: %w: a second %s credential of user %s", line, ErrSyntax, mech, user))
			continue
		}
		if c.byUser[user] == nil {
			c.byUser[user] = map[string]Credential{}
		}
		c.byUser[user][mech] = cr
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	c.findShapes()
	return c, nil
}

// parseCredential reads "salt=..,stored_key=..,server_key=..,iterations=N"
// (any order, each once), keys of size bytes.
func parseCredential(s string, size int) (Credential, error) {
	var c Credential
	seen := map[string]bool{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || seen[k] {
			return c, fmt.Errorf("%w: want salt=,stored_key=,server_key=,iterations= each once", ErrSyntax)
		}
		seen[k] = true
		var err error
		switch k {
		case "salt":
			c.Salt, err = base64.StdEncoding.DecodeString(v)
		case "stored_key":
			c.StoredKey, err = base64.StdEncoding.DecodeString(v)
		case "server_key":
			c.ServerKey, err = base64.StdEncoding.DecodeString(v)
		case "iterations":
			c.Iterations, err = strconv.Atoi(v)
		default:
			return c, fmt.Errorf("%w: unknown field %q", ErrSyntax, k)
		}
		if err != nil {
			return c, fmt.Errorf("%w: %s is not valid", ErrSyntax, k)
		}
	}
	switch {
	case len(seen) != 4:
		return c, fmt.Errorf("%w: want salt=,stored_key=,server_key=,iterations= each once", ErrSyntax)
	case len(c.Salt) == 0:
		return c, fmt.Errorf("%w: an empty salt", ErrSyntax)
	case len(c.StoredKey) != size || len(c.ServerKey) != size:
		return c, fmt.Errorf("%w: stored_key and server_key must be %d bytes", ErrSyntax, size)
	case c.Iterations < MinIterations || c.Iterations > MaxIterations:
		return c, fmt.Errorf("%w: iterations %d outside Kafka's %d-%d", ErrSyntax, c.Iterations, MinIterations, MaxIterations)
	}
	return c, nil
}
