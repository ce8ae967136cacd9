// Package epoch reads and writes a partition's leader-epoch-checkpoint file
// and answers which leader epochs cover a range of offsets.
//
// # Format
//
// A text file of lines separated by '\n':
//
//	0                  version (always 0)
//	2                  number of entries
//	1 0                epoch startOffset
//	2 25               epoch startOffset
//
// Entry i says leader epoch Epoch began at StartOffset; it lasts until the
// next entry's StartOffset. Epochs strictly increase and start offsets never
// decrease. An empty file (0 bytes) is what a broker leaves before the first
// append and is read as no entries.
//
// Source: Apache Kafka CheckpointFile.java, LeaderEpochCheckpointFile.java,
// LeaderEpochFileCache.java.
package epoch

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tierd/tierd/internal/kafkalog"
)

// Entry is one line of the checkpoint: Epoch started at StartOffset.
type Entry struct {
	Epoch       int32 `json:"epoch"`
	StartOffset int64 `json:"startOffset"`
}

const version = 0

// Parse decodes checkpoint bytes. Errors are *kafkalog.CorruptionError whose
// Position is the byte position of the bad line.
func Parse(data []byte) ([]Entry, error) {
	if len(data) == 0 {
		return nil, nil
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	pos := make([]int64, len(lines))
	for i, at := 1, int64(len(lines[0])+1); i < len(lines); i++ {
		pos[i] = at
		at += int64(len(lines[i]) + 1)
	}
	if len(lines) < 2 {
		return nil, kafkalog.Corruptf(0, "leader epoch checkpoint needs a version and a count line")
	}
	if v, err := strconv.Atoi(strings.TrimSpace(lines[0])); err != nil || v != version {
		return nil, kafkalog.Corruptf(0, "unsupported leader epoch checkpoint version %q", lines[0])
	}
	n, err := strconv.Atoi(strings.TrimSpace(lines[1]))
	if err != nil || n < 0 || n != len(lines)-2 {
		return nil, kafkalog.Corruptf(pos[1], "entry count %q does not match %d entry lines", lines[1], len(lines)-2)
	}
	out := make([]Entry, 0, n)
	for i, line := range lines[2:] {
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, kafkalog.Corruptf(pos[i+2], "entry %q: want \"epoch startOffset\"", line)
		}
		ep, err1 := strconv.ParseInt(f[0], 10, 32)
		off, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || ep < 0 || off < 0 {
			return nil, kafkalog.Corruptf(pos[i+2], "entry %q: bad number", line)
		}
		e := Entry{Epoch: int32(ep), StartOffset: off}
		if len(out) > 0 {
			prev := out[len(out)-1]
			if e.Epoch <= prev.Epoch || e.StartOffset < prev.StartOffset {
				return nil, kafkalog.Corruptf(pos[i+2], "entry %q does not follow epoch %d at %d", line, prev.Epoch, prev.StartOffset)
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// Encode returns the checkpoint text for entries.
func Encode(entries []Entry) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", version, len(entries))
	for _, e := range entries {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return b.Bytes()
}

// ReadFile reads and parses a checkpoint file; a missing file gives no
// entries and no error. Corruption errors carry the path.
func ReadFile(path string) ([]Entry, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	e, err := Parse(data)
	return e, kafkalog.WithFile(err, path)
}

// WriteFile replaces path atomically: write a temporary file, fsync it,
// rename it over path, fsync the directory.
func WriteFile(path string, entries []Entry) error {
	return kafkalog.WriteFileAtomic(path, Encode(entries))
}

// InRange returns the entries that cover offsets [start, end] (inclusive),
// with the first one's StartOffset raised to start, which is how the epochs
// of one segment are recorded for tiered storage (KIP-405
// RemoteLogSegmentMetadata.segmentLeaderEpochs). When the first known epoch
// starts after start, the result begins with that epoch unchanged.
func InRange(entries []Entry, start, end int64) []Entry {
	var out []Entry
	for i, e := range entries {
		next := int64(1<<63 - 1)
		if i+1 < len(entries) {
			next = entries[i+1].StartOffset
		}
		if next <= start || e.StartOffset > end || next == e.StartOffset {
			continue
		}
		if e.StartOffset < start {
			e.StartOffset = start
		}
		out = append(out, e)
	}
	return out
}

// Path returns the checkpoint path inside a partition directory.
func Path(partitionDir string) string {
	return filepath.Join(partitionDir, kafkalog.LeaderEpochCheckpointFile)
}
