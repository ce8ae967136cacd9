package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tierd/tierd/internal/kafkaacl"
)

// ACLs returns every ACL the cluster holds: one DescribeAcls request
// (key 29) whose filter matches all (resource type, pattern type,
// operation and permission type ANY; name, principal and host null),
// bounded by RequestTimeout, and src, the broker that answered. Kafka
// answers DescribeAcls only to a principal with DESCRIBE on the Cluster
// resource (or a super user); without it the error wraps
// kerr.ClusterAuthorizationFailed, and a cluster with no authorizer
// configured answers kerr.SecurityDisabled. An ACL the answer holds that
// kafkaacl refuses (a value newer than this code) fails the whole call,
// naming it: a partial set would decide wrongly.
func (c *Client) ACLs(ctx context.Context) (acls []kafkaacl.ACL, src string, err error) {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeAny
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	kresp, meta, err := c.request(ctx, req)
	if err != nil {
		return nil, "", err
	}
	resp := kresp.(*kmsg.DescribeACLsResponse)
	src = source(meta, nil)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		msg := ""
		if resp.ErrorMessage != nil && *resp.ErrorMessage != "" {
			msg = ": " + *resp.ErrorMessage
		}
		return nil, src, fmt.Errorf("cluster: DescribeAcls v%d to %s: %w%s", resp.GetVersion(), src, err, msg)
	}
	var errs []error
	for _, r := range resp.Resources {
		pattern := r.ResourcePatternType
		if resp.GetVersion() == 0 {
			pattern = kmsg.ACLResourcePatternTypeLiteral // v0 has no pattern types: every ACL is literal
		}
		for _, e := range r.ACLs {
			a := kafkaacl.ACL{
				ResourceType: kafkaacl.ResourceType(r.ResourceType),
				ResourceName: r.ResourceName,
				PatternType:  kafkaacl.PatternType(pattern),
				Principal:    e.Principal,
				Host:         e.Host,
				Operation:    kafkaacl.Operation(e.Operation),
				Permission:   kafkaacl.Permission(e.PermissionType),
			}
			if err := a.Validate(); err != nil {
				errs = append(errs, err)
				continue
			}
			acls = append(acls, a)
		}
	}
	if len(errs) > 0 {
		return nil, src, fmt.Errorf("cluster: DescribeAcls v%d to %s: %d ACLs this version of tierd cannot read: %w", resp.GetVersion(), src, len(errs), errors.Join(errs...))
	}
	return acls, src, nil
}
