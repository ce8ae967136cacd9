package checkpoint

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
	testfixtures "github.com/tierd/tierd/internal/testutil/fixtures"
)

func TestReal(t *testing.T) {
	hw, err := ReadFile(testfixtures.Path(t, "ldi-kafka370-kraft/replication-offset-checkpoint"))
	if err != nil || hw[kafkalog.TopicPartition{Topic: "__consumer_offsets", Partition: 6}] != 13 {
		t.Fatalf("%v %v", hw[kafkalog.TopicPartition{Topic: "__consumer_offsets", Partition: 6}], err)
	}
	empty, err := ReadFile(testfixtures.Path(t, "apache-kafka-pr-testdata/pr15553/core/data/kafka-2167572160391180112/replication-offset-checkpoint"))
	if err != nil || empty == nil || len(empty) != 0 {
		t.Fatalf("empty file: %v %v", empty, err)
	}
	if m, err := ReadFile(filepath.Join(t.TempDir(), "nope")); m != nil || err != nil {
		t.Fatalf("missing: %v %v", m, err)
	}
}

func TestBad(t *testing.T) {
	for in, pos := range map[string]int64{"1\n0\n": 0, "0\n2\na 0 1\n": 2, "0\n1\na b 1\n": 4, "0\n1\na 0\n": 4} {
		_, err := Parse([]byte(in))
		var ce *kafkalog.CorruptionError
		if !errors.As(err, &ce) || ce.Position != pos {
			t.Errorf("%q: %v, want position %d", in, err, pos)
		}
	}
}
