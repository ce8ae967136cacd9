package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/tierd/tierd/internal/codec"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/kafkalog/batch"
	"github.com/tierd/tierd/internal/kafkalog/epoch"
	"github.com/tierd/tierd/internal/kafkalog/index"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
)

func runDump(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dump", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: tierd dump FILE...")
		fmt.Fprintln(stderr, "\nPrints one JSON object per line: per batch of a .log, per entry of an")
		fmt.Fprintln(stderr, ".index, .timeindex, .txnindex or leader-epoch-checkpoint, per producer of a")
		fmt.Fprintln(stderr, ".snapshot, per partition of replication-offset-checkpoint,")
		fmt.Fprintln(stderr, "log-start-offset-checkpoint, recovery-point-offset-checkpoint or")
		fmt.Fprintln(stderr, "cleaner-offset-checkpoint. A corrupt file")
		fmt.Fprintln(stderr, "prints what is valid, then an error naming the byte position; a batch")
		fmt.Fprintln(stderr, "whose CRC fails is printed with \"crcValid\":false; a batch whose header")
		fmt.Fprintln(stderr, "breaks a rule no CRC covers (offsets that do not increase or leave the")
		fmt.Fprintln(stderr, "segment, records that do not match the count) is printed and reported by")
		fmt.Fprintln(stderr, "position. Any of these makes the exit status 1. Zero bytes after the last")
		fmt.Fprintln(stderr, "batch of a .log (a preallocated segment) are noted on stderr, not an error.")
	}
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	status := 0
	for _, path := range fs.Args() {
		if err := dumpFile(out, stderr, path); err != nil {
			out.Flush()
			fmt.Fprintf(stderr, "tierd dump: %v\n", err)
			status = 1
		}
	}
	return status
}

// batchLine is one .log entry as "tierd dump" prints it.
type batchLine struct {
	BaseOffset           int64  `json:"baseOffset"`
	LastOffset           int64  `json:"lastOffset"`
	Count                int32  `json:"count"`
	Magic                int8   `json:"magic"`
	Codec                string `json:"codec"`
	TimestampType        string `json:"timestampType"`
	Transactional        bool   `json:"transactional"`
	Control              bool   `json:"control"`
	FirstTimestamp       int64  `json:"firstTimestamp"`
	MaxTimestamp         int64  `json:"maxTimestamp"`
	ProducerID           int64  `json:"producerId"`
	Position             int64  `json:"position"`
	Size                 int32  `json:"size"`
	CRCValid             bool   `json:"crcValid"`
	PartitionLeaderEpoch int32  `json:"partitionLeaderEpoch"`
	ProducerEpoch        int16  `json:"producerEpoch"`
	BaseSequence         int32  `json:"baseSequence"`
	CRC                  uint32 `json:"crc"`
}

type offsetLine struct {
	Offset   int64 `json:"offset"`
	Position int32 `json:"position"`
}

type timeLine struct {
	Timestamp int64 `json:"timestamp"`
	Offset    int64 `json:"offset"`
}

type txnLine struct {
	ProducerID       int64 `json:"producerId"`
	FirstOffset      int64 `json:"firstOffset"`
	LastOffset       int64 `json:"lastOffset"`
	LastStableOffset int64 `json:"lastStableOffset"`
}

type epochLine struct {
	Epoch       int32 `json:"epoch"`
	StartOffset int64 `json:"startOffset"`
}

// dumpFile writes the JSON lines of one file to w, and notes that are not
// errors to note. The kind of file comes from its name; index files also
// need the base offset from the name.
func dumpFile(w, note io.Writer, path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", path)
	}
	name := filepath.Base(path)
	enc := json.NewEncoder(w)
	if name == kafkalog.LeaderEpochCheckpointFile {
		return dumpEpochs(enc, path)
	}
	if offsetCheckpointFiles[name] {
		return dumpCheckpoint(enc, path)
	}
	sf, ok := kafkalog.ParseFileName(name)
	if !ok {
		// An object of a remote copy, downloaded under its key's name
		// (<20-digit base offset>-<segment id><suffix>, rsm's layout).
		if base, _, suffix, remote := rsm.ParseKey(name); remote {
			switch suffix {
			case remotelog.LeaderEpochIndex.Suffix():
				return dumpEpochs(enc, path)
			case rsm.ManifestSuffix:
				return dumpManifest(w, path)
			}
			if err := refuseChunked(path, suffix); err != nil {
				return err
			}
			sf, ok = kafkalog.SegmentFile{BaseOffset: base, Suffix: suffix, Live: true}, true
		}
	}
	if !ok && strings.HasSuffix(name, kafkalog.LogSuffix) {
		sf = kafkalog.SegmentFile{Suffix: kafkalog.LogSuffix} // a .log needs no base offset
	} else if !ok {
		return fmt.Errorf("%s: not a segment file (want <20-digit base offset>.log, .index, .timeindex, .txnindex or .snapshot, leader-epoch-checkpoint, an offset checkpoint, or a remote copy's object named <20-digit base offset>-<segment id> and one of those suffixes, .leader-epoch-checkpoint or .manifest.json)", path)
	}
	switch sf.Suffix {
	case kafkalog.SnapshotSuffix:
		return dumpSnapshot(enc, path)
	case kafkalog.LogSuffix:
		return dumpLog(enc, note, path)
	case kafkalog.IndexSuffix, kafkalog.TimeIndexSuffix, kafkalog.TxnIndexSuffix:
		if st.Size() > math.MaxInt32 {
			return fmt.Errorf("%s: %d bytes, larger than any Kafka index (segment.index.bytes is an int)", path, st.Size())
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return kafkalog.WithFile(dumpIndex(enc, sf, data), path)
	}
	return fmt.Errorf("%s: dumping %s files is not supported", path, sf.Suffix)
}

func dumpIndex(enc *json.Encoder, sf kafkalog.SegmentFile, data []byte) error {
	var parseErr error
	switch sf.Suffix {
	case kafkalog.IndexSuffix:
		var entries []index.OffsetEntry
		entries, parseErr = index.ParseOffsetIndex(data, sf.BaseOffset)
		for _, e := range entries {
			if err := enc.Encode(offsetLine(e)); err != nil {
				return err
			}
		}
	case kafkalog.TimeIndexSuffix:
		var entries []index.TimeEntry
		entries, parseErr = index.ParseTimeIndex(data, sf.BaseOffset)
		for _, e := range entries {
			if err := enc.Encode(timeLine(e)); err != nil {
				return err
			}
		}
	case kafkalog.TxnIndexSuffix:
		var entries []index.AbortedTxn
		entries, parseErr = index.ParseTxnIndex(data)
		for _, e := range entries {
			if err := enc.Encode(txnLine{e.ProducerID, e.FirstOffset, e.LastOffset, e.LastStableOffset}); err != nil {
				return err
			}
		}
	}
	return parseErr
}

// dumpLog prints the entries of a .log. Besides each entry's CRC it checks
// the rules no CRC covers (batch.Checker, Batch.CheckRecords) for a segment
// bounded by its name's base offset and the next .log of its directory. A
// tail of zero bytes after the last entry is noted, not an error.
func dumpLog(enc *json.Encoder, note io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	rules := batch.NewChecker(segmentBounds(path))
	s := batch.NewScanner(f, st.Size(), batch.ScanOptions{VerifyCRC: true})
	var badCRC []int64
	var ruleErr, deepErr error
	broken := 0
	for s.Next() {
		b := s.Batch()
		if b.Legacy() && b.Codec != batch.CodecNone && s.CRCValid() {
			// Only the inner messages tell a wrapper's first offset and count.
			raw, err := s.Raw()
			if err != nil {
				return err
			}
			if err := b.InspectWrapper(raw, codec.Kafka); err != nil && deepErr == nil {
				deepErr = fmt.Errorf("%s: compressed message at byte %d (offset %d): %w", path, b.Position, b.LastOffset, err)
			}
		}
		if !s.CRCValid() {
			badCRC = append(badCRC, b.Position)
		} else if err := checkEntry(rules, s); err != nil {
			if !errors.Is(err, kafkalog.ErrCorrupt) {
				return err
			}
			if broken++; ruleErr == nil {
				ruleErr = kafkalog.WithFile(err, path)
			}
		}
		line := batchLine{
			BaseOffset: b.BaseOffset, LastOffset: b.LastOffset, Count: b.Count, Magic: b.Magic,
			Codec: b.Codec.String(), TimestampType: b.TimestampType.String(),
			Transactional: b.Transactional, Control: b.Control,
			FirstTimestamp: b.FirstTimestamp, MaxTimestamp: b.MaxTimestamp, ProducerID: b.ProducerID,
			Position: b.Position, Size: b.Size, CRCValid: s.CRCValid(), PartitionLeaderEpoch: b.PartitionLeaderEpoch,
			ProducerEpoch: b.ProducerEpoch, BaseSequence: b.BaseSequence, CRC: b.CRC,
		}
		if err := enc.Encode(line); err != nil {
			return err
		}
	}
	var errs []error
	if err := s.Err(); err != nil {
		tailErr := kafkalog.WithFile(err, path)
		if errors.Is(err, kafkalog.ErrCorrupt) {
			nonZero, zerr := batch.FirstNonZero(f, s.ValidEnd(), st.Size())
			switch {
			case zerr != nil:
				tailErr = zerr
			case nonZero < 0:
				fmt.Fprintf(note, "tierd dump: %s: %d zero bytes of preallocation after byte %d (the end of the log)\n", path, st.Size()-s.ValidEnd(), s.ValidEnd())
				tailErr = nil
			default:
				tailErr = fmt.Errorf("%w; the last whole entry ends at byte %d and the first non-zero byte after it is at byte %d", tailErr, s.ValidEnd(), nonZero)
			}
		}
		if tailErr != nil {
			errs = append(errs, tailErr)
		}
	}
	if len(badCRC) > 0 {
		errs = append(errs, &kafkalog.CorruptionError{File: path, Position: badCRC[0],
			Reason: fmt.Sprintf("%d of the entries failed the CRC check, the first at this position", len(badCRC))})
	}
	if ruleErr != nil {
		if broken > 1 {
			ruleErr = fmt.Errorf("%w (%d entries break the header rules; the first is reported)", ruleErr, broken)
		}
		errs = append(errs, ruleErr)
	}
	if deepErr != nil {
		errs = append(errs, deepErr)
	}
	return errors.Join(errs...)
}

// checkEntry applies the header rules and, for an uncompressed batch, the
// record checks to the scanner's current entry.
func checkEntry(rules *batch.Checker, s *batch.Scanner) error {
	if err := rules.Check(s.Batch()); err != nil {
		return err
	}
	return s.CheckRecords()
}

// refuseChunked refuses a remote copy's object whose manifest, downloaded
// beside it, says the copy is in chunked form: its stored bytes are
// compressed or sealed chunks, not Kafka's files.
func refuseChunked(path, suffix string) error {
	data, err := os.ReadFile(strings.TrimSuffix(path, suffix) + rsm.ManifestSuffix)
	if err != nil {
		return nil // no manifest beside it: read it as Kafka's bytes
	}
	var mf struct {
		FormatVersion int `json:"formatVersion"`
	}
	if json.Unmarshal(data, &mf) == nil && mf.FormatVersion >= rsm.ChunkedFormatVersion {
		return fmt.Errorf("%s: the copy is in chunked form (its manifest's format version is %d: compressed or encrypted chunks, docs/formats.md), "+
			"so this object's bytes are not Kafka's; read the copy through tierd (tierd verify checks it, the gRPC API and the Kafka listener serve it)", path, mf.FormatVersion)
	}
	return nil
}

// segmentBounds returns the base offset of the .log at path, from its name
// (0 when the name is not a base offset), and the last offset it may hold:
// the base offset of the next .log in its directory - 1, or -1 when there
// is none (the active segment, or a file kept alone).
func segmentBounds(path string) (base, end int64) {
	sf, ok := kafkalog.ParseFileName(filepath.Base(path))
	if !ok {
		// A remote copy's .log: its base offset from the key; its end is
		// in its manifest, not in a neighbour's name.
		if base, _, _, remote := rsm.ParseKey(filepath.Base(path)); remote {
			return base, -1
		}
	}
	if !ok || !sf.Live {
		return 0, -1
	}
	ents, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return sf.BaseOffset, -1
	}
	next := int64(-1)
	for _, e := range ents {
		o, ok := kafkalog.ParseFileName(e.Name())
		if ok && o.Live && o.Suffix == kafkalog.LogSuffix && o.BaseOffset > sf.BaseOffset && (next < 0 || o.BaseOffset < next) {
			next = o.BaseOffset
		}
	}
	if next < 0 {
		return sf.BaseOffset, -1
	}
	return sf.BaseOffset, next - 1
}

// dumpEpochs prints the entries of a leader-epoch-checkpoint (a broker's
// file, or a remote copy's .leader-epoch-checkpoint object).
func dumpEpochs(enc *json.Encoder, path string) error {
	entries, err := epoch.ReadFile(path)
	for _, e := range entries {
		if err := enc.Encode(epochLine(e)); err != nil {
			return err
		}
	}
	return err
}

// dumpManifest prints a remote copy's manifest (rsm/doc.go) as one JSON
// line, after checking that it decodes as one.
func dumpManifest(w io.Writer, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var m rsm.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("%s: not a copy manifest: %w", path, err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	buf.WriteByte('\n')
	_, err = w.Write(buf.Bytes())
	return err
}
