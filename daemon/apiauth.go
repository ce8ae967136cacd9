package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/tierd/tierd/authz"
	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/internal/kafkaacl"
	"github.com/tierd/tierd/internal/privfile"
)

// AdminSocket is the admin socket's path for cfg.
func AdminSocket(cfg config.Config) string {
	if cfg.Fetch.Auth.AdminSocket != "" {
		return cfg.Fetch.Auth.AdminSocket
	}
	dir, err := filepath.Abs(cfg.Metadata.Dir)
	if err != nil {
		dir = cfg.Metadata.Dir
	}
	p := filepath.Join(dir, "admin", "tierd.sock")
	if len(p) <= grpcapi.MaxSocketPath {
		return p
	}
	// Too long for a Unix socket: a directory of the temporary dir named
	// after the metadata dir, so that tierd and its tools agree on it
	// (ListenLocal refuses it unless it is this user's and 0700).
	sum := sha256.Sum256([]byte(dir))
	return filepath.Join(os.TempDir(), "tierd-"+hex.EncodeToString(sum[:8]), "tierd.sock")
}

// apiTokens are bearer tokens from a tokens file (fetch.tokens_file,
// http.tokens_file), named by key in errors.
type apiTokens struct {
	grpcapi.TokenSet
	file, key string
}

func newAPITokens(file, key string) (*apiTokens, error) {
	t := &apiTokens{file: file, key: key}
	return t, t.reload(config.Config{})
}

// reload reads the tokens file again; a file that does not load changes
// nothing.
func (t *apiTokens) reload(config.Config) error {
	f, err := OpenPrivate(t.file, t.key, false)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := t.Set(f); err != nil {
		return fmt.Errorf("%s %s: %w", t.key, t.file, err)
	}
	return nil
}

// requireToken serves next only to requests with "Authorization: Bearer
// <token>" of one of t's tokens; others get 401 and a sentence that
// names the setting, never the token sent.
func requireToken(t *apiTokens, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if _, known := t.Principal(strings.TrimSpace(tok)); !ok || !known {
			w.Header().Set("WWW-Authenticate", `Bearer realm="tierd"`)
			http.Error(w, "a bearer token of "+t.key+" is required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// OpenPrivate opens a file of secrets, refusing one its group or other
// users may write, or owned by neither this process's user nor root (a
// line added there is a login: internal/privfile) and, with noOtherRead,
// one other users have any access to.
func OpenPrivate(path, what string, noOtherRead bool) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	st, err := f.Stat()
	if err == nil && noOtherRead && st.Mode().Perm()&0o007 != 0 {
		err = fmt.Errorf("%s: %s has mode %v: other users can read it or have other access to it; chmod o-rwx %s", what, path, st.Mode().Perm(), path)
	} else if err == nil {
		err = privfile.Check(what, path, st) // writable by nobody but tierd's user and root
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// fetchAuth builds the gRPC API's grpcapi.Auth from cfg; tokens and acls
// may be nil.
func fetchAuth(cfg config.Config, tokens *apiTokens, acls *authz.Authorizer) grpcapi.Auth {
	rules, _ := kafkaacl.ParsePrincipalRules(cfg.Fetch.Auth.SSLPrincipalMappingRules) // checked by validate
	a := grpcapi.Auth{Mapping: rules, AdminPrincipals: cfg.Fetch.Auth.AdminPrincipals}
	if tokens != nil {
		a.Tokens = tokens
	}
	if acls != nil {
		a.Authorizer = acls
	}
	return a
}

// warnOpenAPI says at start what the gRPC API lets in.
func warnOpenAPI(cfg config.Config, log *slog.Logger, acls bool) {
	authn := cfg.Fetch.Auth.TokensFile != "" || config.Mode(cfg.TLS.GRPC) == config.TLSMTLS
	switch {
	case !authn:
		log.Info("the Admin service is served on the admin socket only (no tokens_file, tls.grpc not mtls)", "socket", AdminSocket(cfg))
	case cfg.Fetch.Auth.TokensFile != "" && config.Mode(cfg.TLS.GRPC) == config.TLSOff && !config.LoopbackOnly(cfg.Fetch.Listen):
		log.Warn("fetch.listen takes bearer tokens over plaintext beyond loopback: anyone on the path can read them; set tls.grpc", "listen", cfg.Fetch.Listen)
	}
	if !acls && !config.LoopbackOnly(cfg.Fetch.Listen) {
		log.Warn("the gRPC read API applies no ACLs: every client that reaches fetch.listen reads every tiered topic; set acls (docs/security.md)", "listen", cfg.Fetch.Listen)
	}
}
