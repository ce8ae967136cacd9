package kafkaacl

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Wildcards of Kafka's ACLs: a Literal resource name "*" matches every
// resource of its type, principal "User:*" every principal, host "*"
// every client address.
const (
	WildcardResource  = "*"
	WildcardPrincipal = "User:*"
	WildcardHost      = "*"
)

// Anonymous is the principal of a client that has not authenticated
// (Kafka's KafkaPrincipal.ANONYMOUS): on PLAINTEXT, and on TLS without a
// client certificate.
const Anonymous = "User:ANONYMOUS"

// ACL is one access control entry bound to a resource pattern: Kafka's
// AclBinding (a ResourcePattern and an AccessControlEntry).
type ACL struct {
	// ResourceType, ResourceName and PatternType are the resource
	// pattern: PatternLiteral matches ResourceName exactly (or every
	// resource when it is "*"), PatternPrefixed every name that begins
	// with it.
	ResourceType ResourceType
	ResourceName string
	PatternType  PatternType
	// Principal is "<type>:<name>" as Kafka prints a KafkaPrincipal
	// ("User:alice"), or "User:*".
	Principal string
	// Host is "*" or a client IP address as Kafka prints it (see
	// HostString). Kafka stores any text here; a host name, or an IPv6
	// address written otherwise, matches no client, in Kafka as here.
	Host       string
	Operation  Operation
	Permission Permission
}

// ErrInvalid marks an ACL that Kafka would not store: a filter value
// (ANY, UNKNOWN, MATCH), an empty resource name, a principal without a
// type (Kafka's AclControlManager.validateNewAcl and its principal
// parse). Kafka checks no host: one that is not an address it prints
// matches no client.
var ErrInvalid = errors.New("kafkaacl: invalid ACL")

// Validate reports why a is not an ACL Kafka would hold, wrapping
// ErrInvalid; nil when it is one.
func (a ACL) Validate() error {
	var errs []string
	if a.ResourceType < ResourceTopic || a.ResourceType > ResourceUser {
		errs = append(errs, fmt.Sprintf("resource type %v", a.ResourceType))
	}
	if a.PatternType != PatternLiteral && a.PatternType != PatternPrefixed {
		errs = append(errs, fmt.Sprintf("pattern type %v (LITERAL or PREFIXED)", a.PatternType))
	}
	if a.ResourceName == "" {
		errs = append(errs, "an empty resource name")
	}
	if i := strings.IndexByte(a.Principal, ':'); i <= 0 || i == len(a.Principal)-1 {
		errs = append(errs, fmt.Sprintf("principal %q (want <type>:<name>, e.g. User:alice)", a.Principal))
	}
	if a.Operation < OpAll || a.Operation > OpDescribeTokens {
		errs = append(errs, fmt.Sprintf("operation %v", a.Operation))
	}
	if a.Permission != Allow && a.Permission != Deny {
		errs = append(errs, fmt.Sprintf("permission type %v (ALLOW or DENY)", a.Permission))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrInvalid, strings.Join(errs, "; "))
}

// String prints a as kafka-acls lists it: the resource pattern, then the
// entry.
func (a ACL) String() string {
	return fmt.Sprintf("%s %s", a.patternString(), a.entryString())
}

func (a ACL) patternString() string {
	return fmt.Sprintf("ResourcePattern(resourceType=%v, name=%s, patternType=%v)", a.ResourceType, a.ResourceName, a.PatternType)
}

func (a ACL) entryString() string {
	return fmt.Sprintf("(principal=%s, host=%s, operation=%v, permissionType=%v)", a.Principal, a.Host, a.Operation, a.Permission)
}

func sortStrings(s []string) { sort.Strings(s) }
