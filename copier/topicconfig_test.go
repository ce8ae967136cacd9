package copier

import "testing"

// TestDefaultRetentionFieldsApart: each default is its own variable, so a
// config decoder that writes local.retention.ms through its pointer
// leaves local.retention.bytes at its default (a shared pointer made
// local.retention.ms: 3600000 a 3.4 MB local size limit too).
func TestDefaultRetentionFieldsApart(t *testing.T) {
	r := DefaultRetention()
	*r.LocalRetentionMs = 3600000
	*r.RetentionMs = 1
	if *r.LocalRetentionBytes != -2 || *r.RetentionBytes != -1 {
		t.Fatalf("writing the ms fields changed the bytes fields: local.retention.bytes %d, retention.bytes %d",
			*r.LocalRetentionBytes, *r.RetentionBytes)
	}
}
