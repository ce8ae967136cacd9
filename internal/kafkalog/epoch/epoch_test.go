package epoch

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
	testfixtures "github.com/tierd/tierd/internal/testutil/fixtures"
)

func TestParseReal(t *testing.T) {
	cases := map[string][]Entry{
		"apache-kafka-pr-testdata/pr15553/core/data/kafka-2167572160391180112/__cluster_metadata-0": {{1, 0}, {2, 25}},
		"apache-kafka-pr-testdata/pr15553/core/data/kafka-13294002803961715372/test-topic-0":        {{1, 0}},
		"sharaweil-kafka0110/data/test0-0": {{0, 0}},
	}
	for dir, want := range cases {
		got, err := ReadFile(Path(testfixtures.Path(t, dir)))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, %v; want %v", dir, got, err, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		in  string
		pos int64
	}{
		"bad version":      {"1\n0\n", 0},
		"count mismatch":   {"0\n2\n1 0\n", 2},
		"bad entry":        {"0\n1\nx 0\n", 4},
		"three fields":     {"0\n1\n1 2 3\n", 4},
		"epoch goes back":  {"0\n2\n5 0\n4 10\n", 8},
		"offset goes back": {"0\n2\n1 10\n2 5\n", 9},
		"no count":         {"0\n", 0},
	} {
		_, err := Parse([]byte(tc.in))
		var ce *kafkalog.CorruptionError
		if !errors.As(err, &ce) || ce.Position != tc.pos {
			t.Errorf("%s: %v, want corruption at %d", name, err, tc.pos)
		}
	}
	if e, err := Parse(nil); err != nil || e != nil {
		t.Errorf("empty file: %v %v", e, err)
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), kafkalog.LeaderEpochCheckpointFile)
	in := []Entry{{0, 0}, {3, 100}, {4, 100}, {9, 5000}}
	if err := WriteFile(p, in); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(p)
	if string(raw) != "0\n4\n0 0\n3 100\n4 100\n9 5000\n" {
		t.Errorf("file text %q", raw)
	}
	out, err := ReadFile(p)
	if err != nil || !reflect.DeepEqual(in, out) {
		t.Fatalf("%v %v", out, err)
	}
	if _, err := os.Stat(p + ".tmp"); !os.IsNotExist(err) {
		t.Error("temporary file left behind")
	}
	if e, err := ReadFile(filepath.Join(t.TempDir(), "missing")); err != nil || e != nil {
		t.Errorf("missing file: %v %v", e, err)
	}
}

func TestInRange(t *testing.T) {
	es := []Entry{{1, 0}, {2, 25}, {4, 100}, {5, 100}, {6, 300}}
	for _, tc := range []struct {
		start, end int64
		want       []Entry
	}{
		{0, 24, []Entry{{1, 0}}},
		{10, 30, []Entry{{1, 10}, {2, 25}}},
		{25, 99, []Entry{{2, 25}}},
		{50, 150, []Entry{{2, 50}, {5, 100}}}, // epoch 4 covers no offset
		{400, 500, []Entry{{6, 400}}},
	} {
		if got := InRange(es, tc.start, tc.end); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("InRange(%d, %d) = %v, want %v", tc.start, tc.end, got, tc.want)
		}
	}
	if got := InRange([]Entry{{3, 50}}, 0, 60); !reflect.DeepEqual(got, []Entry{{3, 50}}) {
		t.Errorf("epoch starting inside the range: %v", got)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("0\n2\n1 0\n2 25\n"))
	f.Add([]byte("0\n0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		es, err := Parse(data)
		if err != nil {
			return
		}
		back, err := Parse(Encode(es))
		if err != nil || !reflect.DeepEqual(back, es) && len(es) > 0 {
			t.Fatalf("re-encoding %v: %v %v", es, back, err)
		}
	})
}
