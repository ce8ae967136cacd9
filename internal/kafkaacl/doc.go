// Package kafkaacl holds Kafka's access control lists and its rules for
// deciding a request with them, for the endpoints that serve a Kafka
// cluster's data: the resource, pattern, operation and permission types
// with Kafka's wire codes (those of DescribeAcls, KIP-140; prefixed
// patterns, KIP-290), an immutable indexed Set, an Authorizer with the
// rules of Kafka's StandardAuthorizer (see Authorizer), the client
// address text those rules compare (HostString), and an ACL file.
//
// # The ACL file
//
// For a tierd that has no Kafka cluster to read ACLs from, an ACL file
// holds them in the form "kafka-acls --list" prints, so that a
// cluster's ACLs can be saved to it as they are and the file read as
// kafka-acls output reads:
//
//	# orders: the billing service reads, nobody else
//	Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:
//		(principal=User:billing, host=*, operation=READ, permissionType=ALLOW)
//		(principal=User:*, host=10.0.0.9, operation=ALL, permissionType=DENY)
//
//	Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=logs-, patternType=PREFIXED)`:
//		(principal=User:ops, host=*, operation=DESCRIBE, permissionType=ALLOW)
//
// A line is blank, a comment (first non-blank character '#'), a
// resource pattern line ("Current ACLs for resource `ResourcePattern(
// ...)`:", or the bare "ResourcePattern(...)"), or an entry
// "(principal=..., host=..., operation=..., permissionType=...)" that
// applies to the last pattern line above it. Leading and trailing blanks
// are ignored. Names are Kafka's (TOPIC, GROUP, CLUSTER,
// TRANSACTIONAL_ID, DELEGATION_TOKEN, USER; LITERAL, PREFIXED; READ,
// WRITE, ..., ALL; ALLOW, DENY), in any case, with '-' or ' ' for '_'.
// A resource name runs to the last ", patternType=" of its line and a
// principal to the last ", host=", so names holding ", " (a group, an
// mTLS distinguished name) read back whole; a resource name cannot end a
// line's pattern with ", patternType=" itself. A file with any bad line
// is refused whole, every bad line named.
//
// The principal is "<type>:<name>" as Kafka prints a KafkaPrincipal
// ("User:alice", "User:*" for every principal); the host is "*" or a
// client address exactly as HostString prints it (Kafka compares the
// text: "0:0:0:0:0:0:0:1", not "::1"); a file with any other host is
// refused, since that entry would match no client. (The cluster's own
// ACLs are taken as the cluster holds them, hosts unchecked, as Kafka
// takes them.)
package kafkaacl
