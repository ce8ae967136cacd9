package kafkaacl

import (
	"errors"
	"net/netip"
	"strconv"
	"testing"
)

func topicACL(name string, pt PatternType, principal, host string, op Operation, perm Permission) ACL {
	return ACL{ResourceType: ResourceTopic, ResourceName: name, PatternType: pt, Principal: principal, Host: host, Operation: op, Permission: perm}
}

// TestAuthorize: Kafka's rules, one table row per rule (StandardAuthorizer
// is the reference: super users, DENY before ALLOW, what ALLOW implies,
// literal, prefixed and wildcard patterns, principals and hosts, and the
// default when no ACL matches the resource).
func TestAuthorize(t *testing.T) {
	const alice, bob, anon = "User:alice", "User:bob", "User:ANONYMOUS"
	const h1, h2 = "10.0.0.1", "10.0.0.2"
	L, P := PatternLiteral, PatternPrefixed
	tests := []struct {
		name      string
		acls      []ACL
		z         Authorizer
		req       Request
		allowed   bool
		rule      string
		decidedBy int // index into acls of the deciding ACL, -1 none
	}{
		{"no ACL at all: denied by default", nil, Authorizer{},
			Request{alice, h1, OpRead, ResourceTopic, "orders"}, false, "DefaultDeny", -1},
		{"no ACL at all, allow.everyone.if.no.acl.found", nil, Authorizer{AllowEveryoneIfNoACLFound: true},
			Request{alice, h1, OpRead, ResourceTopic, "orders"}, true, "DefaultAllow", -1},
		{"a super user, whatever denies", []ACL{topicACL("orders", L, alice, "*", OpAll, Deny)},
			Authorizer{SuperUsers: map[string]bool{alice: true}},
			Request{alice, h1, OpRead, ResourceTopic, "orders"}, true, "SuperUser", -1},
		{"a literal ALLOW of READ", []ACL{topicACL("orders", L, alice, "*", OpRead, Allow)}, Authorizer{},
			Request{alice, h1, OpRead, ResourceTopic, "orders"}, true, "MatchingAcl", 0},
		{"READ implies DESCRIBE", []ACL{topicACL("orders", L, alice, "*", OpRead, Allow)}, Authorizer{},
			Request{alice, h1, OpDescribe, ResourceTopic, "orders"}, true, "MatchingAcl", 0},
		{"WRITE, DELETE and ALTER imply DESCRIBE too", []ACL{topicACL("orders", L, alice, "*", OpAlter, Allow)}, Authorizer{},
			Request{alice, h1, OpDescribe, ResourceTopic, "orders"}, true, "MatchingAcl", 0},
		{"DESCRIBE implies nothing", []ACL{topicACL("orders", L, alice, "*", OpDescribe, Allow)}, Authorizer{AllowEveryoneIfNoACLFound: true},
			Request{alice, h1, OpRead, ResourceTopic, "orders"}, false, "DefaultDeny", -1},
		{"ALTER_CONFIGS implies DESCRIBE_CONFIGS", []ACL{topicACL("orders", L, alice, "*", OpAlterConfigs, Allow)}, Authorizer{},
			Request{alice, h1, OpDescribeConfigs, ResourceTopic, "orders"}, true, "MatchingAcl", 0},
		{"READ does not imply DESCRIBE_CONFIGS", []ACL{topicACL("orders", L, alice, "*", OpRead, Allow)}, Authorizer{},
			Request{alice, h1, OpDescribeConfigs, ResourceTopic, "orders"}, false, "DefaultDeny", -1},
		{"a DENY of READ does not deny DESCRIBE", []ACL{topicACL("orders", L, alice, "*", OpRead, Allow), topicACL("orders", L, alice, "*", OpRead, Deny)}, Authorizer{},
			Request{alice, h1, OpDescribe, ResourceTopic, "orders"}, true, "MatchingAcl", 0},
		{"DENY before ALLOW on one pattern", []ACL{topicACL("orders", L, alice, "*", OpRead, Allow), topicACL("orders", L, alice, "*", OpRead, Deny)}, Authorizer{},
			Request{alice, h1, OpRead, ResourceTopic, "orders"}, false, "MatchingAcl", 1},
		{"a prefixed DENY beats a literal ALLOW", []ACL{topicACL("orders", L, alice, "*", OpRead, Allow), topicACL("ord", P, alice, "*", OpRead, Deny)}, Authorizer{},
			Request{alice, h1, OpRead, ResourceTopic, "orders"}, false, "MatchingAcl", 1},
		{"a wildcard DENY of ALL beats a literal ALLOW", []ACL{topicACL("orders", L, alice, "*", OpRead, Allow), topicACL("*", L, "User:*", "*", OpAll, Deny)}, Authorizer{},
			Request{alice, h1, OpDescribe, ResourceTopic, "orders"}, false, "MatchingAcl", 1},
		{"a prefixed ALLOW", []ACL{topicACL("ord", P, alice, "*", OpRead, Allow)}, Authorizer{},
			Request{alice, h1, OpRead, ResourceTopic, "orders"}, true, "MatchingAcl", 0},
		{"a prefix as long as the name matches it", []ACL{topicACL("orders", P, alice, "*", OpRead, Allow)}, Authorizer{},
			Request{alice, h1, OpRead, ResourceTopic, "orders"}, true, "MatchingAcl", 0},
		{"a prefix longer than the name does not match", []ACL{topicACL("orders", P, alice, "*", OpRead, Allow)}, Authorizer{AllowEveryoneIfNoACLFound: true},
			Request{alice, h1, OpRead, ResourceTopic, "ord"}, true, "DefaultAllow", -1},
		{"a literal is not a prefix", []ACL{topicACL("orders", L, alice, "*", OpRead, Allow)}, Authorizer{AllowEveryoneIfNoACLFound: true},
			Request{bob, h1, OpRead, ResourceTopic, "orders2"}, true, "DefaultAllow", -1},
		{"the wildcard resource", []ACL{topicACL("*", L, alice, "*", OpRead, Allow)}, Authorizer{},
			Request{alice, h1, OpRead, ResourceTopic, "anything"}, true, "MatchingAcl", 0},
		{"the wildcard principal", []ACL{topicACL("orders", L, "User:*", "*", OpRead, Allow)}, Authorizer{},
			Request{anon, h1, OpRead, ResourceTopic, "orders"}, true, "MatchingAcl", 0},
		{"an ACL for another principal denies by its presence, even with allow.everyone",
			[]ACL{topicACL("orders", L, bob, "*", OpRead, Allow)}, Authorizer{AllowEveryoneIfNoACLFound: true},
			Request{alice, h1, OpRead, ResourceTopic, "orders"}, false, "DefaultDeny", -1},
		{"an ACL for another operation denies by its presence", []ACL{topicACL("orders", L, alice, "*", OpWrite, Allow)}, Authorizer{AllowEveryoneIfNoACLFound: true},
			Request{alice, h1, OpRead, ResourceTopic, "orders"}, false, "DefaultDeny", -1},
		{"a host that is not the client's", []ACL{topicACL("orders", L, alice, h2, OpRead, Allow)}, Authorizer{},
			Request{alice, h1, OpRead, ResourceTopic, "orders"}, false, "DefaultDeny", -1},
		{"the client's host", []ACL{topicACL("orders", L, alice, h1, OpRead, Allow)}, Authorizer{},
			Request{alice, h1, OpRead, ResourceTopic, "orders"}, true, "MatchingAcl", 0},
		{"a DENY from another host does not apply", []ACL{topicACL("orders", L, alice, "*", OpRead, Allow), topicACL("orders", L, alice, h2, OpAll, Deny)}, Authorizer{},
			Request{alice, h1, OpRead, ResourceTopic, "orders"}, true, "MatchingAcl", 0},
		{"principals are compared with their case", []ACL{topicACL("orders", L, "user:alice", "*", OpRead, Allow)}, Authorizer{},
			Request{alice, h1, OpRead, ResourceTopic, "orders"}, false, "DefaultDeny", -1},
		{"an ACL on a group of the same name is not the topic's",
			[]ACL{{ResourceType: ResourceGroup, ResourceName: "orders", PatternType: L, Principal: bob, Host: "*", Operation: OpRead, Permission: Allow}},
			Authorizer{AllowEveryoneIfNoACLFound: true},
			Request{alice, h1, OpRead, ResourceTopic, "orders"}, true, "DefaultAllow", -1},
		{"ALL allows every operation", []ACL{topicACL("orders", L, alice, "*", OpAll, Allow)}, Authorizer{},
			Request{alice, h1, OpDelete, ResourceTopic, "orders"}, true, "MatchingAcl", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewSet(tt.acls)
			if err != nil {
				t.Fatal(err)
			}
			d := tt.z.Authorize(s, tt.req)
			if d.Allowed != tt.allowed || d.Rule != tt.rule {
				t.Fatalf("got allowed %v by %s (%v), want allowed %v by %s", d.Allowed, d.Rule, d.ACL, tt.allowed, tt.rule)
			}
			switch {
			case tt.decidedBy < 0 && d.ACL != nil:
				t.Fatalf("decided by %v, want no ACL", *d.ACL)
			case tt.decidedBy >= 0 && (d.ACL == nil || *d.ACL != tt.acls[tt.decidedBy]):
				t.Fatalf("decided by %v, want %v", d.ACL, tt.acls[tt.decidedBy])
			}
		})
	}
}

// TestNilSet: a nil Set holds nothing; the default decides.
func TestNilSet(t *testing.T) {
	var s *Set
	if s.Len() != 0 || s.ACLs() != nil {
		t.Fatal("nil set not empty")
	}
	if d := (Authorizer{AllowEveryoneIfNoACLFound: true}).Authorize(s, Request{"User:a", "*", OpRead, ResourceTopic, "t"}); !d.Allowed {
		t.Fatalf("%+v", d)
	}
}

// TestNewSetInvalid: filter values, empty names and malformed principals
// are refused, each named.
func TestNewSetInvalid(t *testing.T) {
	good := topicACL("orders", PatternLiteral, "User:alice", "*", OpRead, Allow)
	bad := []func(*ACL){
		func(a *ACL) { a.ResourceType = ResourceAny },
		func(a *ACL) { a.PatternType = PatternMatch },
		func(a *ACL) { a.ResourceName = "" },
		func(a *ACL) { a.Principal = "alice" },
		func(a *ACL) { a.Principal = "User:" },
		func(a *ACL) { a.Operation = OpAny },
		func(a *ACL) { a.Permission = PermissionAny },
	}
	for i, f := range bad {
		a := good
		f(&a)
		if _, err := NewSet([]ACL{good, a}); !errors.Is(err, ErrInvalid) {
			t.Errorf("case %d (%v): %v, want ErrInvalid", i, a, err)
		}
	}
	s, err := NewSet([]ACL{good, good})
	if err != nil || s.Len() != 1 {
		t.Fatalf("duplicates: %v, len %d", err, s.Len())
	}
}

// TestHostString: client addresses as Java's InetAddress.getHostAddress
// prints them, the text Kafka's ACL hosts are compared with.
func TestHostString(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.1":         "10.0.0.1",
		"::1":              "0:0:0:0:0:0:0:1",
		"::ffff:10.0.0.1":  "10.0.0.1",
		"2001:db8::ab":     "2001:db8:0:0:0:0:0:ab",
		"fe80::1%eth0":     "fe80:0:0:0:0:0:0:1%eth0",
		"2001:DB8:0:0:1::": "2001:db8:0:0:1:0:0:0",
	} {
		if got := HostString(netip.MustParseAddr(in)); got != want {
			t.Errorf("HostString(%s) = %s, want %s", in, got, want)
		}
	}
}

// BenchmarkAuthorize: one decision among 10,000 ACLs on 1,000 topics (a
// literal, a prefixed and a wildcard pattern each checked), the cost of
// each topic of a Metadata answer.
func BenchmarkAuthorize(b *testing.B) {
	var acls []ACL
	for i := 0; i < 1000; i++ {
		for j := 0; j < 10; j++ {
			acls = append(acls, topicACL("topic-"+strconv.Itoa(i), PatternLiteral, "User:u"+strconv.Itoa(j), "*", OpRead, Allow))
		}
	}
	acls = append(acls, topicACL("topic-", PatternPrefixed, "User:ops", "*", OpDescribe, Allow))
	s, err := NewSet(acls)
	if err != nil {
		b.Fatal(err)
	}
	z := Authorizer{}
	r := Request{"User:u9", "10.0.0.1", OpRead, ResourceTopic, "topic-777"}
	b.ReportAllocs()
	for b.Loop() {
		if !z.Authorize(s, r).Allowed {
			b.Fatal("denied")
		}
	}
}
