package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tierd/tierd/authz"
	"github.com/tierd/tierd/cluster"
	"github.com/tierd/tierd/grpcapi"
	"github.com/tierd/tierd/internal/kafkaacl"
	"github.com/tierd/tierd/listener"
	"github.com/tierd/tierd/rsm/chunked"
	"github.com/tierd/tierd/rsm/filesystem"
	"github.com/tierd/tierd/rsm/minio"
	"github.com/tierd/tierd/rsm/s3"
)

// Metrics is the metrics: section.
type Metrics struct {
	// PartitionLabelsMax is how many partitions get series of their own
	// in the per-partition metrics (tierd_remote_*{topic,partition}): the
	// first ones seen since start; every later one shares
	// {topic="_other",partition="-1"}. Default 1000; 0 aggregates all.
	PartitionLabelsMax int `yaml:"partition.labels.max"`
}

// Kafka is the kafka: section: two packages' settings inline, and
// tierd's own for the listener's logins and Kafka's listener names.
type Kafka struct {
	// Cluster is the Kafka cluster tierd asks (package cluster): off
	// without bootstrap_servers.
	Cluster cluster.Config `yaml:",inline"`
	// Listener is tierd's read-only Kafka protocol listener (package
	// listener): off without listen or listeners.
	Listener listener.Config `yaml:",inline"`
	// Logins is where the listener's SASL credentials come from.
	Logins Logins `yaml:",inline"`
	// Listeners names several listeners, Kafka's way.
	Listeners Listeners `yaml:",inline"`
}

// Logins is where the Kafka listener's SASL credentials come from.
type Logins struct {
	// SASLCredentialsFile holds the SCRAM credentials clients log in
	// with (listener/sasl's form; "tierd sasl credential" makes a line),
	// read at start and again on SIGHUP. It must not be readable by other
	// users. Default "": with bootstrap_servers, every login is relayed to
	// the Kafka cluster and judged there (sasl.Relay); without, it is
	// required by sasl.enabled.mechanisms.
	SASLCredentialsFile string `yaml:"sasl.credentials.file"`
	// AllowUnauthenticated lets the Kafka listener serve beyond loopback
	// with nobody authenticated (no sasl.enabled.mechanisms, tls.kafka not
	// mtls) and no acls: every client that reaches it reads every topic
	// served. tierd's own setting. Default false: such a listen address
	// is refused at start.
	AllowUnauthenticated bool `yaml:"allow.unauthenticated"`
}

// ACLs says where the ACLs that authorize the Kafka listener's clients
// come from, and how they decide (authz.Config: refresh_interval,
// max_stale, super.users, allow.everyone.if.no.acl.found).
type ACLs struct {
	// Source is "" (default: no authorization; every client reads every
	// topic served), "cluster" (the Kafka cluster's own ACLs, read with
	// DescribeAcls through kafka.bootstrap_servers, whose principal needs
	// DESCRIBE on the Cluster resource) or "file" (File).
	Source string `yaml:"source"`
	// File is an ACL file in the form "kafka-acls --list" prints
	// (internal/kafkaacl), read again every refresh_interval and on
	// SIGHUP; for source "file".
	File         string `yaml:"file"`
	authz.Config `yaml:",inline"`
}

// validate reports the section's problems, k the Kafka section beside it.
func (a ACLs) validate(k Kafka) []error {
	var errs []error
	switch a.Source {
	case "":
		if a.File != "" {
			errs = append(errs, errors.New("acls: file is set but source is empty: set source: file"))
		}
		return errs
	case "cluster":
		if !k.Cluster.Enabled() {
			errs = append(errs, errors.New("acls: source cluster needs kafka.bootstrap_servers (the cluster to read the ACLs from)"))
		}
	case "file":
		if a.File == "" {
			errs = append(errs, errors.New("acls: source file needs file (the ACL file's path)"))
		}
	default:
		errs = append(errs, fmt.Errorf("acls: source %q: want \"\" (off), cluster or file", a.Source))
	}
	if err := a.Config.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// HTTP is the http: section.
type HTTP struct {
	// Listen serves /metrics, /-/healthy, /-/ready and the status page
	// at / (package daemon/statuspage). Default
	// "127.0.0.1:7451"; "" turns it off.
	Listen string `yaml:"listen"`
	// Pprof serves Go's runtime profiles (net/http/pprof: CPU, heap,
	// goroutine, block, mutex) under /debug/pprof/ on Listen, and turns
	// on block and mutex profiling (a sampled cost on every contended
	// lock and channel wait). Anyone who can reach Listen can take them:
	// for profiling on a trusted host only. Default false.
	Pprof bool `yaml:"pprof"`
	// TokensFile, when set, makes the status page, /metrics and the
	// profiles answer only requests with "Authorization: Bearer <token>"
	// of one of its tokens (grpcapi.TokenSet's form, "tierd api token"
	// makes a line; Prometheus sends one with authorization:
	// credentials_file); /-/healthy and /-/ready stay open. Read at start
	// and on SIGHUP; it must not be writable by group or other users.
	// Default "".
	TokensFile string `yaml:"tokens_file"`
}

// Bucket picks and configures the object store.
type Bucket struct {
	// Type is filesystem (default), minio (minio-go) or s3 (aws-sdk-go-v2).
	Type string `yaml:"type"`
	// Prefix is prepended to every object key tierd writes and reads
	// (rsm.Config.Prefix), without a leading or trailing '/'. Default "".
	Prefix string `yaml:"prefix"`
	// Filesystem is the bucket of type filesystem: a directory, for one
	// host (package rsm/filesystem).
	Filesystem filesystem.Config `yaml:"filesystem"`
	// MinIO is the bucket of type minio: an S3 API through minio-go
	// (package rsm/minio).
	MinIO minio.Config `yaml:"minio"`
	// S3 is the bucket of type s3: an S3 API through aws-sdk-go-v2
	// (package rsm/s3).
	S3 s3.Config `yaml:"s3"`
}

// Objects is the objects: section: how new copies are stored (package
// rsm/chunked: chunks, each compressed with zstd and sealed with
// AES-256-GCM as set) and the key-encryption keys (KEKs) that wrap
// encrypted copies' data keys. Copies of every form stay readable
// whatever it says, encrypted ones while their KEK is listed.
type Objects struct {
	// Config is the form of new copies: chunk.size, compression.*,
	// encryption.enabled.
	chunked.Config `yaml:",inline"`
	// EncryptionKeyID is the KEK new copies' data keys are wrapped by
	// (its id in encryption.keys); rotating it makes new copies use the
	// new KEK while old copies keep theirs, until "tierd keys rewrap"
	// moves them. Default "": the only key of encryption.keys, when
	// there is one.
	EncryptionKeyID string `yaml:"encryption.key.id"`
	// EncryptionKeys maps a KEK's id (letters, digits, '.', '_', '-';
	// recorded in each copy's manifest) to the file holding it: 32 random
	// bytes, or 64 hex digits and an optional newline ("tierd keys new"
	// makes one), owned by tierd's user and not readable by group or
	// other users. Needed with encryption.enabled, and to read copies
	// encrypted before. Default none.
	EncryptionKeys map[string]string `yaml:"encryption.keys"`
}

// CurrentKeyID is encryption.key.id, or the only key's id.
func (o Objects) CurrentKeyID() string {
	if o.EncryptionKeyID != "" || len(o.EncryptionKeys) != 1 {
		return o.EncryptionKeyID
	}
	for id := range o.EncryptionKeys {
		return id
	}
	return ""
}

// Validate checks the form and that encryption has its keys. It reads no
// file (the daemon loads the keys).
func (o Objects) Validate() error {
	var errs []error
	if err := o.Config.Validate(); err != nil {
		errs = append(errs, err)
	}
	for _, id := range slices.Sorted(maps.Keys(o.EncryptionKeys)) {
		if err := chunked.CheckKEKID(id); err != nil {
			errs = append(errs, fmt.Errorf("encryption.keys: %w", err))
		}
		if o.EncryptionKeys[id] == "" {
			errs = append(errs, fmt.Errorf("encryption.keys: key %q has no file", id))
		}
	}
	cur := o.CurrentKeyID()
	_, listed := o.EncryptionKeys[cur]
	switch {
	case o.Encryption && len(o.EncryptionKeys) == 0:
		errs = append(errs, errors.New("encryption.enabled needs encryption.keys (a key id and the file that holds it)"))
	case cur == "" && o.Encryption:
		errs = append(errs, errors.New("encryption.key.id is required with several encryption.keys: the one new copies use"))
	case cur != "" && !listed:
		errs = append(errs, fmt.Errorf("encryption.key.id %q is not in encryption.keys", cur))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("objects: %w", err)
	}
	return nil
}

// Fetch is the fetch: section: the read engine's settings and who may
// call the gRPC API, inline.
type Fetch struct {
	// Config is the read engine and the gRPC API's address (package
	// fetch).
	grpcapi.Config `yaml:",inline"`
	// Auth is who may call the gRPC API.
	Auth APIAuth `yaml:",inline"`
}

// APIAuth is who may call the gRPC API (docs/security.md, grpcapi.Auth).
type APIAuth struct {
	// AdminSocket is the admin socket's path: a Unix socket serving every
	// gRPC service (the Admin service among them) to tierd's own user,
	// mode 0600 in a directory of mode 0700 that tierd's user owns;
	// tierd's tools reach a running tierd through it. Default "":
	// admin/tierd.sock in metadata.dir, or, when that path is longer than
	// a Unix socket's may be (107 bytes), tierd-<hash of metadata.dir>/
	// in the temporary dir.
	AdminSocket string `yaml:"admin.socket"`
	// TokensFile holds the bearer tokens callers on fetch.listen may
	// present, as SHA-256 digests with the principal each stands for
	// (grpcapi.TokenSet's form; "tierd api token" makes a line); read at
	// start and again on SIGHUP; it must not be writable by group or other
	// users. With it, the Admin service is served on fetch.listen too.
	// Default "".
	TokensFile string `yaml:"tokens_file"`
	// AdminPrincipals may use every Admin method on fetch.listen, as
	// Kafka writes a principal ("User:ops"). Default none: only callers
	// the ACLs grant (DELETE, ALTER, DESCRIBE on the topic).
	AdminPrincipals []string `yaml:"admin.principals"`
	// SSLPrincipalMappingRules maps a client certificate's subject to a
	// principal's name under tls.grpc: mtls, in Kafka's syntax (see the
	// kafka listener's). Default "" (DEFAULT: the subject itself).
	SSLPrincipalMappingRules string `yaml:"ssl.principal.mapping.rules"`
	// ClientTokenFile is the file whose first line is the token tierd's
	// tools present on fetch.listen when no admin socket answers (a tool
	// on another host). It must not be readable by group or other users.
	// Default "".
	ClientTokenFile string `yaml:"client.token_file"`
}

// Validate reports every problem at once, joined; it reads no file.
func (a APIAuth) Validate() error {
	var errs []error
	for _, p := range a.AdminPrincipals {
		if i := strings.IndexByte(p, ':'); i <= 0 || i == len(p)-1 {
			errs = append(errs, fmt.Errorf("fetch: admin.principals %q is not a principal <type>:<name> (e.g. User:ops)", p))
		}
	}
	if _, err := kafkaacl.ParsePrincipalRules(a.SSLPrincipalMappingRules); err != nil {
		errs = append(errs, fmt.Errorf("fetch: ssl.principal.mapping.rules: %w", err))
	}
	if a.AdminSocket != "" && len(a.AdminSocket) > grpcapi.MaxSocketPath {
		errs = append(errs, fmt.Errorf("fetch: admin.socket is %d bytes long, more than the %d a Unix socket path may be", len(a.AdminSocket), grpcapi.MaxSocketPath))
	}
	return errors.Join(errs...)
}
