package checkpoint

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"sync"

	"github.com/tierd/tierd/internal/kafkalog"
)

// Format encodes entries in the offset checkpoint format (version 0, the
// count, then "topic partition offset" lines), sorted by topic and
// partition so that equal maps give equal bytes.
func Format(entries map[kafkalog.TopicPartition]int64) []byte {
	tps := make([]kafkalog.TopicPartition, 0, len(entries))
	for tp := range entries {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
	out := []byte("0\n" + strconv.Itoa(len(tps)) + "\n")
	for _, tp := range tps {
		out = fmt.Appendf(out, "%s %d %d\n", tp.Topic, tp.Partition, entries[tp])
	}
	return out
}

// WriteFile replaces the checkpoint file at path with entries, atomically
// as Kafka's CheckpointFile.write does: write path+".tmp", fsync it, rename
// it over path, fsync the directory.
func WriteFile(path string, entries map[kafkalog.TopicPartition]int64) error {
	return kafkalog.WriteFileAtomic(path, Format(entries))
}

// fileLocks serialises Update and Remove calls on one file within the
// process, keyed by its cleaned absolute path so that two spellings of
// one path (a Log opened with a relative directory, another with an
// absolute one) share a lock: they also share the ".tmp" file.
var fileLocks sync.Map // absolute path -> *sync.Mutex

// lockFile locks path's mutex and returns its unlock.
func lockFile(path string) func() {
	key, err := filepath.Abs(path)
	if err != nil {
		key = filepath.Clean(path)
	}
	mu, _ := fileLocks.LoadOrStore(key, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	return mu.(*sync.Mutex).Unlock
}

// Update sets tp's entry of the checkpoint file at path to offset and keeps
// every other entry, creating the file when missing. Calls for one path are
// serialised within the process; the file must not be written by another
// process at the same time. Errors: the file's parse error (a corrupt file
// is left as it is, not overwritten) or an I/O error.
func Update(path string, tp kafkalog.TopicPartition, offset int64) error {
	defer lockFile(path)()
	entries, err := ReadFile(path)
	if err != nil {
		return fmt.Errorf("update %s: %w", path, err)
	}
	if entries == nil {
		entries = map[kafkalog.TopicPartition]int64{}
	}
	entries[tp] = offset
	return WriteFile(path, entries)
}

// Remove deletes tp's entry from the checkpoint file at path and keeps
// every other entry, as Kafka's LogCleanerManager.updateCheckpoints does
// for a deleted partition. A missing file or entry is not an error and
// leaves the file untouched. Calls are serialised with Update. Errors: the
// file's parse error (a corrupt file is left as it is) or an I/O error.
func Remove(path string, tp kafkalog.TopicPartition) error {
	defer lockFile(path)()
	entries, err := ReadFile(path)
	if err != nil {
		return fmt.Errorf("update %s: %w", path, err)
	}
	if _, ok := entries[tp]; !ok {
		return nil
	}
	delete(entries, tp)
	return WriteFile(path, entries)
}
