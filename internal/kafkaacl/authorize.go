package kafkaacl

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// Set is an immutable set of ACLs, indexed for Authorize. A nil *Set
// holds no ACL. Safe for concurrent use.
type Set struct {
	acls   []ACL
	byType map[ResourceType]*typeIndex
}

// typeIndex holds the ACLs of one resource type by how they match.
type typeIndex struct {
	literal   map[string][]int // by resource name, "*" aside
	wildcard  []int            // Literal "*"
	prefixed  map[string][]int // by prefix
	maxPrefix int              // the longest prefix, bytes
}

// NewSet indexes acls. Errors: every invalid ACL, by its position and
// why (errors.Is ErrInvalid); no Set is returned then. Duplicates are
// kept once.
func NewSet(acls []ACL) (*Set, error) {
	s := &Set{byType: map[ResourceType]*typeIndex{}}
	var errs []error
	seen := map[ACL]bool{}
	for i, a := range acls {
		if err := a.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("ACL %d (%v): %w", i+1, a, err))
			continue
		}
		if seen[a] {
			continue
		}
		seen[a] = true
		s.acls = append(s.acls, a)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	sort.Slice(s.acls, func(i, j int) bool { return less(s.acls[i], s.acls[j]) })
	for i, a := range s.acls {
		ix := s.byType[a.ResourceType]
		if ix == nil {
			ix = &typeIndex{literal: map[string][]int{}, prefixed: map[string][]int{}}
			s.byType[a.ResourceType] = ix
		}
		switch {
		case a.PatternType == PatternLiteral && a.ResourceName == WildcardResource:
			ix.wildcard = append(ix.wildcard, i)
		case a.PatternType == PatternLiteral:
			ix.literal[a.ResourceName] = append(ix.literal[a.ResourceName], i)
		default:
			ix.prefixed[a.ResourceName] = append(ix.prefixed[a.ResourceName], i)
			ix.maxPrefix = max(ix.maxPrefix, len(a.ResourceName))
		}
	}
	return s, nil
}

func less(a, b ACL) bool {
	if a.ResourceType != b.ResourceType {
		return a.ResourceType < b.ResourceType
	}
	if a.ResourceName != b.ResourceName {
		return a.ResourceName < b.ResourceName
	}
	if a.PatternType != b.PatternType {
		return a.PatternType < b.PatternType
	}
	return a.entryString() < b.entryString()
}

// Len returns how many distinct ACLs s holds.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.acls)
}

// ACLs returns a copy of s's ACLs, sorted by resource pattern.
func (s *Set) ACLs() []ACL {
	if s == nil {
		return nil
	}
	return append([]ACL(nil), s.acls...)
}

// Request is one action to authorize: who, from where, what, on which
// resource (Kafka's AuthorizableRequestContext and Action, a Literal
// resource).
type Request struct {
	// Principal is the caller's "<type>:<name>" ("User:alice";
	// "User:ANONYMOUS" for an unauthenticated client, as Kafka names it).
	Principal string
	// Host is the client's address as HostString prints it.
	Host         string
	Operation    Operation
	ResourceType ResourceType
	ResourceName string
}

// Authorizer decides Requests against a Set with Kafka's rules
// (StandardAuthorizer, KIP-801; the same as AclAuthorizer's):
//
//   - a principal named in SuperUsers is allowed everything;
//   - the ACLs that match the resource are those of its type whose
//     pattern is Literal and equal to its name, Literal "*", or Prefixed
//     by a prefix of its name; of them, an ACL applies when its
//     principal is the caller's or "User:*", its host the caller's or
//     "*", and its operation the one asked, or ALL; an ALLOW of READ,
//     WRITE, DELETE or ALTER also allows DESCRIBE, and one of
//     ALTER_CONFIGS also allows DESCRIBE_CONFIGS (a DENY denies only its
//     own operation, or ALL);
//   - any applying DENY denies, whatever allows; else any applying ALLOW
//     allows;
//   - else, when some ACL matches the resource (whoever it names), the
//     request is denied; when none does, it is allowed only if
//     AllowEveryoneIfNoACLFound (Kafka's allow.everyone.if.no.acl.found,
//     default false).
type Authorizer struct {
	// SuperUsers are principals allowed everything (Kafka's super.users,
	// "User:admin;User:ops" there), compared as strings.
	SuperUsers map[string]bool
	// AllowEveryoneIfNoACLFound allows a request on a resource that no
	// ACL matches. Default false.
	AllowEveryoneIfNoACLFound bool
}

// Decision is the answer to one Request, with the rule that gave it as
// Kafka's audit log names it ("SuperUser", "DefaultAllow", "DefaultDeny",
// "MatchingAcl(...)").
type Decision struct {
	Allowed bool
	Rule    string
	// ACL is the ACL that decided, for MatchingAcl; nil otherwise.
	ACL *ACL
}

// Authorize decides r against s. It allocates nothing when it allows by
// ACL or denies by default.
func (z Authorizer) Authorize(s *Set, r Request) Decision {
	if z.SuperUsers[r.Principal] {
		return Decision{Allowed: true, Rule: "SuperUser"}
	}
	var ix *typeIndex
	if s != nil {
		ix = s.byType[r.ResourceType]
	}
	found, allow := false, -1
	if ix != nil {
		check := func(list []int) (deny int) {
			for _, i := range list {
				found = true
				switch applies(&s.acls[i], r) {
				case Deny:
					return i
				case Allow:
					if allow < 0 {
						allow = i
					}
				}
			}
			return -1
		}
		if d := check(ix.literal[r.ResourceName]); d >= 0 {
			return s.decided(d)
		}
		for n := min(ix.maxPrefix, len(r.ResourceName)); n > 0; n-- {
			if list, ok := ix.prefixed[r.ResourceName[:n]]; ok {
				if d := check(list); d >= 0 {
					return s.decided(d)
				}
			}
		}
		if d := check(ix.wildcard); d >= 0 {
			return s.decided(d)
		}
	}
	switch {
	case allow >= 0:
		return s.decided(allow)
	case found || !z.AllowEveryoneIfNoACLFound:
		return Decision{Rule: "DefaultDeny"}
	}
	return Decision{Allowed: true, Rule: "DefaultAllow"}
}

func (s *Set) decided(i int) Decision {
	a := &s.acls[i]
	return Decision{Allowed: a.Permission == Allow, Rule: "MatchingAcl", ACL: a}
}

// applies returns a's permission when it applies to r (principal, host
// and operation), PermissionUnknown when it does not.
func applies(a *ACL, r Request) Permission {
	if a.Principal != r.Principal && a.Principal != WildcardPrincipal {
		return PermissionUnknown
	}
	if a.Host != WildcardHost && a.Host != r.Host {
		return PermissionUnknown
	}
	if a.Operation != OpAll && a.Operation != r.Operation {
		if a.Permission != Allow || !implies(a.Operation, r.Operation) {
			return PermissionUnknown
		}
	}
	return a.Permission
}

// implies: an ALLOW of have also allows want (Kafka's IMPLIES_DESCRIBE
// and IMPLIES_DESCRIBE_CONFIGS).
func implies(have, want Operation) bool {
	switch want {
	case OpDescribe:
		return have == OpRead || have == OpWrite || have == OpDelete || have == OpAlter
	case OpDescribeConfigs:
		return have == OpAlterConfigs
	}
	return false
}

// HostString prints a client address as Kafka's authorizer sees it
// (java.net.InetAddress.getHostAddress): an IPv4 address (also one
// mapped into IPv6) dotted, an IPv6 address as eight groups of
// lower-case hex without leading zeros and without "::" shortening
// ("0:0:0:0:0:0:0:1" for ::1), its zone after '%'. An ACL's host is
// compared with this text as a string, as Kafka compares it, so an ACL
// written "::1" matches no client, in Kafka as here.
func HostString(a netip.Addr) string {
	a = a.Unmap()
	if !a.Is6() {
		return a.String()
	}
	b := a.As16()
	var sb strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			sb.WriteByte(':')
		}
		sb.WriteString(strconv.FormatUint(uint64(b[i])<<8|uint64(b[i+1]), 16))
	}
	if z := a.Zone(); z != "" {
		sb.WriteByte('%')
		sb.WriteString(z)
	}
	return sb.String()
}
