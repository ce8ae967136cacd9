package kafkaacl

import (
	"fmt"
	"strings"
)

// ResourceType is the kind of resource an ACL names, with Kafka's wire
// codes (org.apache.kafka.common.resource.ResourceType; the
// ResourceType fields of DescribeAcls, KIP-140).
type ResourceType int8

// Kafka's resource types. Any and Unknown are filter values: an ACL never
// carries them.
const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7
)

// ClusterName is the only name of the Cluster resource (Kafka's
// "kafka-cluster").
const ClusterName = "kafka-cluster"

var resourceNames = map[ResourceType]string{
	ResourceUnknown: "UNKNOWN", ResourceAny: "ANY", ResourceTopic: "TOPIC", ResourceGroup: "GROUP",
	ResourceCluster: "CLUSTER", ResourceTransactionalID: "TRANSACTIONAL_ID",
	ResourceDelegationToken: "DELEGATION_TOKEN", ResourceUser: "USER",
}

// PatternType says how an ACL's resource name matches a resource's name
// (org.apache.kafka.common.resource.PatternType, KIP-290).
type PatternType int8

// Kafka's pattern types. An ACL is Literal (the name itself, or "*" for
// every resource of its type) or Prefixed (every name that starts with
// it); Any, Match and Unknown are filter values.
const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1
	PatternMatch    PatternType = 2
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

var patternNames = map[PatternType]string{
	PatternUnknown: "UNKNOWN", PatternAny: "ANY", PatternMatch: "MATCH", PatternLiteral: "LITERAL", PatternPrefixed: "PREFIXED",
}

// Operation is what a request does to a resource
// (org.apache.kafka.common.acl.AclOperation).
type Operation int8

// Kafka's operations. All in an ACL matches every operation; Any and
// Unknown are filter values.
const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
)

var opNames = map[Operation]string{
	OpUnknown: "UNKNOWN", OpAny: "ANY", OpAll: "ALL", OpRead: "READ", OpWrite: "WRITE", OpCreate: "CREATE",
	OpDelete: "DELETE", OpAlter: "ALTER", OpDescribe: "DESCRIBE", OpClusterAction: "CLUSTER_ACTION",
	OpDescribeConfigs: "DESCRIBE_CONFIGS", OpAlterConfigs: "ALTER_CONFIGS", OpIdempotentWrite: "IDEMPOTENT_WRITE",
	OpCreateTokens: "CREATE_TOKENS", OpDescribeTokens: "DESCRIBE_TOKENS",
}

// Permission is an ACL's verdict (org.apache.kafka.common.acl.AclPermissionType).
type Permission int8

// Kafka's permission types; Any and Unknown are filter values.
const (
	PermissionUnknown Permission = 0
	PermissionAny     Permission = 1
	Deny              Permission = 2
	Allow             Permission = 3
)

var permNames = map[Permission]string{PermissionUnknown: "UNKNOWN", PermissionAny: "ANY", Deny: "DENY", Allow: "ALLOW"}

func (t ResourceType) String() string { return name(resourceNames, t) }
func (t PatternType) String() string  { return name(patternNames, t) }
func (o Operation) String() string    { return name(opNames, o) }
func (p Permission) String() string   { return name(permNames, p) }

func name[K comparable](m map[K]string, k K) string {
	if s, ok := m[k]; ok {
		return s
	}
	return fmt.Sprintf("%v", any(k))
}

// ParseResourceType, ParsePatternType, ParseOperation and
// ParsePermission read the names Kafka prints (TOPIC, PREFIXED, READ,
// ALLOW), in any case, and the names kafka-acls takes with words joined
// by '-' or ' ' (transactional-id, describe-configs). Errors name the
// value and the names allowed.
func ParseResourceType(s string) (ResourceType, error) {
	return parse(resourceNames, "resource type", s)
}

// ParsePatternType: see ParseResourceType.
func ParsePatternType(s string) (PatternType, error) { return parse(patternNames, "pattern type", s) }

// ParseOperation: see ParseResourceType.
func ParseOperation(s string) (Operation, error) { return parse(opNames, "operation", s) }

// ParsePermission: see ParseResourceType.
func ParsePermission(s string) (Permission, error) { return parse(permNames, "permission type", s) }

func parse[K comparable](m map[K]string, what, s string) (K, error) {
	norm := strings.ToUpper(strings.NewReplacer("-", "_", " ", "_").Replace(strings.TrimSpace(s)))
	for k, n := range m {
		if n == norm {
			return k, nil
		}
	}
	var zero K
	names := make([]string, 0, len(m))
	for _, n := range m {
		if n != "ANY" && n != "UNKNOWN" && n != "MATCH" { // filters' words, not an ACL's
			names = append(names, n)
		}
	}
	sortStrings(names)
	article := "a"
	if strings.ContainsRune("aeiou", rune(what[0])) {
		article = "an"
	}
	return zero, fmt.Errorf("kafkaacl: %q is not %s %s (one of %s)", s, article, what, strings.Join(names, ", "))
}
