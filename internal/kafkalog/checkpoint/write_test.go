package checkpoint

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/tierd/tierd/internal/kafkalog"
)

func TestUpdateKeepsOtherEntries(t *testing.T) {
	path := filepath.Join(t.TempDir(), CleanerOffsetFile)
	a, b := kafkalog.TopicPartition{Topic: "a", Partition: 0}, kafkalog.TopicPartition{Topic: "b", Partition: 3}
	if err := Update(path, a, 10); err != nil {
		t.Fatal(err)
	}
	if err := Update(path, b, 7); err != nil {
		t.Fatal(err)
	}
	if err := Update(path, a, 12); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if string(data) != "0\n2\na 0 12\nb 3 7\n" {
		t.Fatalf("file %q", data)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("tmp file left: %v", err)
	}
}

func TestUpdateRefusesCorruptFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), CleanerOffsetFile)
	if err := os.WriteFile(path, []byte("9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Update(path, kafkalog.TopicPartition{Topic: "a"}, 1); err == nil {
		t.Fatal("a corrupt checkpoint was overwritten")
	}
	if data, _ := os.ReadFile(path); string(data) != "9\n" {
		t.Fatalf("corrupt file changed to %q", data)
	}
}

func TestConcurrentUpdatesLoseNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), CleanerOffsetFile)
	var wg sync.WaitGroup
	for p := int32(0); p < 8; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := Update(path, kafkalog.TopicPartition{Topic: "t", Partition: p}, int64(p)*10); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	m, err := ReadFile(path)
	if err != nil || len(m) != 8 || m[kafkalog.TopicPartition{Topic: "t", Partition: 5}] != 50 {
		t.Fatalf("%v %v", m, err)
	}
}

func TestRemoveKeepsOtherEntries(t *testing.T) {
	path := filepath.Join(t.TempDir(), CleanerOffsetFile)
	a, b := kafkalog.TopicPartition{Topic: "a", Partition: 0}, kafkalog.TopicPartition{Topic: "b", Partition: 3}
	if err := Remove(path, a); err != nil {
		t.Fatalf("remove from a missing file: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("remove created the file: %v", err)
	}
	for tp, off := range map[kafkalog.TopicPartition]int64{a: 10, b: 7} {
		if err := Update(path, tp, off); err != nil {
			t.Fatal(err)
		}
	}
	if err := Remove(path, a); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); string(data) != "0\n1\nb 3 7\n" {
		t.Fatalf("file %q", data)
	}
	if err := os.WriteFile(path, []byte("0\n5\nb 3 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Remove(path, b); err == nil {
		t.Fatal("remove from a corrupt file: no error")
	}
	if data, _ := os.ReadFile(path); string(data) != "0\n5\nb 3 7\n" {
		t.Fatalf("corrupt file rewritten: %q", data)
	}
}

// TestUpdateSerialisesPathSpellings updates one file from many goroutines
// through different spellings of its path (two Logs opened with a relative
// and an absolute directory): no entry may be lost and the file must parse.
func TestUpdateSerialisesPathSpellings(t *testing.T) {
	dir := t.TempDir()
	spellings := []string{
		filepath.Join(dir, CleanerOffsetFile),
		dir + "/./" + CleanerOffsetFile,
		dir + "//" + CleanerOffsetFile,
		filepath.Join(dir, "sub", "..", CleanerOffsetFile),
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	const n = 64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tp := kafkalog.TopicPartition{Topic: "t", Partition: int32(i)}
			if err := Update(spellings[i%len(spellings)], tp, int64(i)); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	m, err := ReadFile(spellings[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != n {
		t.Fatalf("%d entries after %d updates", len(m), n)
	}
}
