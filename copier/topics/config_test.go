package topics

import (
	"strings"
	"testing"
)

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

// TestParseCleanupPolicy: Kafka's list syntax, and errors for the rest.
func TestParseCleanupPolicy(t *testing.T) {
	for in, want := range map[string]string{"delete": "delete", "compact": "compact", "compact,delete": "compact,delete",
		"delete, compact": "compact,delete", "": "error", "Compact": "error", "compact;delete": "error"} {
		p, err := ParseCleanupPolicy(in)
		got := p.String()
		if err != nil {
			got = "error"
		}
		if got != want {
			t.Errorf("%q: %s, want %s", in, got, want)
		}
	}
}

// TestValidate: the bad values of an entry, each named with where.
func TestValidate(t *testing.T) {
	ratio := 1.5
	tc := TopicConfig{Retention: Retention{RetentionMs: i64(-3), LocalRetentionBytes: i64(-3)}, CleanupPolicy: str(""), MinCleanableDirtyRatio: &ratio}
	var got []string
	for _, err := range tc.Validate("copier: topics: x: ") {
		got = append(got, err.Error())
	}
	for _, want := range []string{"copier: topics: x: retention.ms -3: must be -1 or more", "copier: topics: x: local.retention.bytes -3: must be -2 or more",
		"copier: topics: x: cleanup.policy: empty", "copier: topics: x: min.cleanable.dirty.ratio 1.5 is out of range (from 0 to 1)"} {
		if !strings.Contains(strings.Join(got, "\n"), want) {
			t.Errorf("Validate = %q, lacks %q", got, want)
		}
	}
	if len(got) != 4 {
		t.Errorf("Validate = %q, want 4 errors", got)
	}
	if errs := (TopicConfig{Retention: DefaultRetention()}).Validate(""); len(errs) != 0 {
		t.Errorf("the defaults are refused: %v", errs)
	}
}
