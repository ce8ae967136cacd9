package authz

import (
	"context"
	"fmt"
	"os"

	"github.com/tierd/tierd/internal/kafkaacl"
)

// FileSource reads the ACLs from an ACL file (internal/kafkaacl's form,
// what "kafka-acls --list" prints), whole at every read, so that an edit
// takes effect at the next refresh or at once on Refresh (SIGHUP). A
// file with any bad line is refused whole, and the ACLs read before keep
// deciding.
type FileSource struct {
	// Path is the file's path.
	Path string
}

// ACLs implements Source. from is the path.
func (f FileSource) ACLs(context.Context) ([]kafkaacl.ACL, string, error) {
	r, err := os.Open(f.Path)
	if err != nil {
		return nil, f.Path, err
	}
	defer r.Close()
	acls, err := kafkaacl.Parse(r)
	if err != nil {
		return nil, f.Path, fmt.Errorf("ACL file %s: %w", f.Path, err)
	}
	return acls, f.Path, nil
}
