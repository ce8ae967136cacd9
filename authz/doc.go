// Package authz decides who may do what on tierd's endpoints with Kafka's
// ACLs: an Authorizer holds the ACLs its Source last gave (the Kafka
// cluster's, read with DescribeAcls, or an ACL file's), reads them again
// every refresh interval, and decides each request with Kafka's rules
// (internal/kafkaacl; super.users and allow.everyone.if.no.acl.found as
// Kafka names them).
//
// While reads fail (the cluster unreachable, the file unreadable or
// invalid) the last ACLs read keep deciding, for at most Config.MaxStale;
// past it every request but a super user's is denied until a read
// succeeds, so that a revoke in a cluster tierd cannot reach is applied
// within MaxStale + RefreshInterval at the latest. Before the first read
// succeeds every request but a super user's is denied (Kafka's
// authorizer refuses requests until it has loaded its ACLs, too).
package authz
