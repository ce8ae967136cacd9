package authz

import (
	"context"
	"fmt"
	"os"

	"github.com/tierd/tierd/internal/kafkaacl"
	"github.com/tierd/tierd/internal/privfile"
)

// FileSource reads the ACLs from an ACL file (internal/kafkaacl's form,
// what "kafka-acls --list" prints), whole at every read, so that an edit
// takes effect at the next refresh or at once on Refresh (SIGHUP). A
// file with any bad line is refused whole, and the ACLs read before keep
// deciding; so is a file its group or other users may write, or owned by
// neither this process's user nor root (its writer could grant
// themselves anything: internal/privfile).
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
	st, err := r.Stat()
	if err != nil {
		return nil, f.Path, err
	}
	if err := privfile.Check("acls: file", f.Path, st); err != nil {
		return nil, f.Path, err
	}
	acls, err := kafkaacl.Parse(r)
	if err != nil {
		return nil, f.Path, fmt.Errorf("ACL file %s: %w", f.Path, err)
	}
	return acls, f.Path, nil
}
