package daemon

import (
	"fmt"
	"strings"
	"time"

	"github.com/tierd/tierd/authz"
	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/daemon/statuspage"
)

// securityFacts are the status page's live facts on who may reach what:
// the Kafka listener's logins and ACLs, the gRPC API's callers and the
// HTTP endpoint's tokens. They name settings and counts, never a secret.
func securityFacts(cfg config.Config, acls *authz.Authorizer, apiTokens, httpTokens *apiTokens) func() []statuspage.Fact {
	return func() []statuspage.Fact {
		var out []statuspage.Fact
		if eps, _ := cfg.KafkaEndpoints(); len(eps) > 0 {
			logins := "none (every client is " + "User:ANONYMOUS" + ")"
			switch {
			case cfg.Kafka.Listener.SASL() && cfg.Kafka.Logins.SASLCredentialsFile != "":
				logins = strings.Join(cfg.Kafka.Listener.SASLEnabledMechanisms, ", ") + " against sasl.credentials.file"
			case cfg.Kafka.Listener.SASL():
				logins = strings.Join(cfg.Kafka.Listener.SASLEnabledMechanisms, ", ") + " checked by the Kafka cluster"
			}
			out = append(out, statuspage.Fact{Name: "kafka logins", Value: logins})
		}
		out = append(out, statuspage.Fact{Name: "acls", Value: aclsFact(cfg, acls)})
		api := "admin socket only for Admin"
		if apiTokens != nil || config.Mode(cfg.TLS.GRPC) == config.TLSMTLS {
			api = "Admin on fetch.listen to authenticated callers"
			if apiTokens != nil {
				api += " (" + count(apiTokens.Len(), "token") + ")"
			}
		}
		out = append(out, statuspage.Fact{Name: "gRPC API", Value: api})
		if httpTokens != nil {
			out = append(out, statuspage.Fact{Name: "this page", Value: "bearer token required (" + count(httpTokens.Len(), "token") + ")"})
		}
		return out
	}
}

// aclsFact says what decides requests: none, or the ACLs, how many, from
// where, how old, and whether reads fail or the set went stale.
func aclsFact(cfg config.Config, a *authz.Authorizer) string {
	if a == nil {
		return "none: every client reads every topic served"
	}
	st := a.Status()
	if !st.Loaded {
		return "not loaded yet (" + cfg.ACLs.Source + "): every request but a super user's is denied"
	}
	s := fmt.Sprintf("%d from %s, read %s ago", st.ACLs, st.From, time.Since(st.LoadedAt).Round(time.Second))
	switch {
	case st.Stale:
		s += fmt.Sprintf("; STALE after %d failed reads: every request but a super user's is denied", st.Failures)
	case st.Error != "":
		s += fmt.Sprintf("; the last %d reads failed: %s", st.Failures, st.Error)
	}
	return s
}

// count is "1 token", "2 tokens".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
