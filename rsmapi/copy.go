package rsmapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"time"

	"github.com/tierd/tierd/internal/crashpoint"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
)

// UploadContentType is the Content-Type of a copy by upload.
const UploadContentType = "application/vnd.tierd.segment"

// errCopyTimeout is the cause of a copy past rsm.copy_timeout.
var errCopyTimeout = errors.New("the copy did not end within rsm.copy_timeout")

// errShutdown is the cause of a copy ended by tierd's shutdown.
var errShutdown = errors.New("tierd is shutting down")

// errClientGone is the cause of a copy whose client went away (closed
// its connection: its own timeout, or the broker's task cancelled).
var errClientGone = errors.New("the client went away")

// handleCopy is PUT C.
//
// Behavior:
//   - The name is checked (400), then the topic against tierd's copier
//     (409), then a slot among rsm.max_concurrent_copies is taken or the
//     request is refused (429), then the segment id's lock is waited for:
//     copies of one id run one after the other.
//   - The copy runs under rsm.copy_timeout (504 past it), ends when the
//     client goes away, and is ended by a DELETE of the same id.
//   - Files are opened once (by path, after the path checks; by upload,
//     spooled into rsm.staging_dir) and checked; only then is the row
//     written COPY_SEGMENT_STARTED and the objects uploaded, the manifest
//     last; they are checked stored, the row goes COPY_SEGMENT_FINISHED,
//     and only then the answer is 200.
//   - A failure after the row was written deletes the objects this
//     request stored (and aborts its multipart uploads) before it answers.
func (s *Server) handleCopy(w http.ResponseWriter, r *http.Request) {
	began := time.Now()
	c, err := parseName(r)
	if err != nil {
		s.fail(w, opCopy, nil, err, began)
		return
	}
	ans, err := s.copyRequest(w, r, c)
	if err != nil {
		s.fail(w, opCopy, &c.tp, err, began)
		return
	}
	s.m.copyBytes.WithLabelValues(s.m.partition(c.tp)...).Add(float64(ans.Bytes))
	writeJSON(w, http.StatusOK, ans)
	s.m.observe(opCopy, &c.tp, "OK", false, began)
}

// copyRequest runs one copy request to its answer.
func (s *Server) copyRequest(w http.ResponseWriter, r *http.Request, c copyName) (*copyAnswer, error) {
	if s.shutting.Load() {
		return nil, fmt.Errorf("%w: copy of %s: shutting down", ErrUnavailable, c)
	}
	if s.sidecar != nil && s.sidecar(c.tp.Topic) {
		return nil, fmt.Errorf("%w: copy of %s: topic %s is tiered by tierd's own copier (copier.log_dirs); a topic is tiered one way only",
			ErrTieredBySidecar, c, c.tp.Topic)
	}
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		return nil, fmt.Errorf("%w: copy of %s: %d copies are running (rsm.max_concurrent_copies)", ErrTooManyCopies, c, s.cfg.MaxConcurrentCopies)
	}
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
	defer cancel(nil)
	stopGone := context.AfterFunc(r.Context(), func() { cancel(errClientGone) })
	defer stopGone()
	stop := context.AfterFunc(s.copies, func() { cancel(errShutdown) })
	defer stop()
	ctx, cancelT := context.WithTimeoutCause(ctx, s.cfg.CopyTimeout, errCopyTimeout)
	defer cancelT()
	release, err := s.flights.acquire(ctx, c.id, cancel)
	if err != nil {
		return nil, s.copyError(ctx, c, fmt.Errorf("copy of %s: wait for the copy of the same id before it: %w", c, err))
	}
	defer release()
	files, spec, cleanup, err := s.receiveBounded(ctx, w, r, c)
	if err != nil {
		return nil, s.copyError(ctx, c, err)
	}
	defer cleanup()
	ans, err := s.runCopy(ctx, spec, files)
	if errors.Is(context.Cause(ctx), errClientGone) {
		s.log.Info("rsm: copy ended: the client went away", "copy", c.String(), "err", err)
	}
	return ans, s.copyError(ctx, c, err)
}

// copyError returns err with what ended the copy, when something did:
// its deadline (ErrTimeout), a DELETE of the same id or shutdown
// (ErrUnavailable).
func (s *Server) copyError(ctx context.Context, c copyName, err error) error {
	if err == nil {
		return nil
	}
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errCopyTimeout):
		return fmt.Errorf("%w: copy of %s: %w after %s: %w", ErrTimeout, c, cause, s.cfg.CopyTimeout, err)
	case errors.Is(cause, errEndedByDelete), errors.Is(cause, errShutdown), errors.Is(cause, errClientGone):
		return fmt.Errorf("%w: copy of %s %w: %w", ErrUnavailable, c, cause, err)
	}
	return err
}

// receiveBounded is receive with the reads of the body bounded by the
// copy: they end as soon as it does (rsm.copy_timeout, a DELETE of the
// same id, shutdown), instead of waiting for a client that stalls
// mid-body. After a failure, the rest of the body gets bodyGrace (see
// boundUnreadBody).
func (s *Server) receiveBounded(ctx context.Context, w http.ResponseWriter, r *http.Request, c copyName) (*Files, copySpec, func(), error) {
	rc := http.NewResponseController(w)
	// No deadline but the copy's end, which comes first: a read cut by
	// it is then told from a body that is bad.
	rc.SetReadDeadline(time.Time{})
	stop := context.AfterFunc(ctx, func() { rc.SetReadDeadline(time.Now()) })
	files, spec, cleanup, err := s.receive(ctx, r, c)
	if stop() && err != nil {
		s.boundUnreadBody(w)
	}
	if err != nil && ctx.Err() != nil {
		// What ended the copy ended the read of its body too: the body
		// itself is not shown to be invalid.
		err = fmt.Errorf("copy of %s: its body could not be read whole (%v): %w", c, err, context.Cause(ctx))
	}
	return files, spec, cleanup, err
}

// receive reads the request's body and opens the copy's files: by path
// (JSON) or by upload (UploadContentType). cleanup closes them (and
// removes staged files).
func (s *Server) receive(ctx context.Context, r *http.Request, c copyName) (*Files, copySpec, func(), error) {
	ct := r.Header.Get("Content-Type")
	if ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil {
			return nil, copySpec{}, nil, invalidf("Content-Type %q: %v", ct, err)
		}
		ct = mt
	}
	switch ct {
	case UploadContentType:
		return s.receiveUpload(ctx, r, c)
	case "", "application/json":
		var q copyRequest
		if err := decodeJSON(http.MaxBytesReader(nil, r.Body, maxJSONBytes), &q); err != nil {
			return nil, copySpec{}, nil, fmt.Errorf("copy of %s: %w", c, err)
		}
		spec, err := q.spec(c)
		if err != nil {
			return nil, spec, nil, fmt.Errorf("copy of %s: %w", c, err)
		}
		files, cleanup, err := s.openByPath(&q, c)
		if err != nil {
			return nil, spec, nil, fmt.Errorf("copy of %s: %w", c, err)
		}
		files.LeaderEpochCheckpoint, files.LeaderEpochs = spec.checkpoint, spec.epochs
		return files, spec, cleanup, nil
	}
	return nil, copySpec{}, nil, invalidf("copy of %s: Content-Type %q: want application/json (by path) or %s (by upload)", c, ct, UploadContentType)
}

// openByPath checks and opens every file a copy by path names. Nothing is
// opened when one path fails its checks.
func (s *Server) openByPath(q *copyRequest, c copyName) (*Files, func(), error) {
	type named struct {
		path string
		kind fileKind
		dst  *Source
	}
	files := &Files{}
	todo := []named{{q.LogSegment, kindLog, &files.Log}, {q.OffsetIndex, kindOffsetIndex, &files.OffsetIndex}, {q.TimeIndex, kindTimeIndex, &files.TimeIndex}}
	if q.TransactionIndex != nil {
		todo = append(todo, named{*q.TransactionIndex, kindTxnIndex, &files.TxnIndex})
	}
	if q.ProducerSnapshot != nil {
		todo = append(todo, named{*q.ProducerSnapshot, kindSnapshot, &files.ProducerSnapshot})
	}
	for _, n := range todo {
		if n.path == "" {
			return nil, nil, invalidf("%s must be given", n.kind)
		}
	}
	var opened []*os.File
	cleanup := func() {
		for _, f := range opened {
			f.Close()
		}
	}
	for _, n := range todo {
		f, err := openBrokerFile(n.path, s.cfg.LogDirs, c, n.kind)
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		opened = append(opened, f)
		st, err := f.Stat()
		if err != nil {
			cleanup()
			return nil, nil, fmt.Errorf("stat %s: %w", n.path, err)
		}
		// Stored as they are (the offset and time indexes are checked, and
		// rebuilt when unusable), so bounded as for a copy by upload.
		if (n.kind == kindTxnIndex || n.kind == kindSnapshot) && st.Size() > maxIndexBytes {
			cleanup()
			return nil, nil, fmt.Errorf("%w: %s %s holds %d bytes, more than an index may (%d)", ErrTooLarge, n.kind, n.path, st.Size(),
				int64(maxIndexBytes))
		}
		*n.dst = Source{Name: n.path, R: f, Size: st.Size()}
	}
	return files, cleanup, nil
}

// runCopy checks the files, records the row and stores the copy; see
// handleCopy.
func (s *Server) runCopy(ctx context.Context, spec copySpec, files *Files) (*copyAnswer, error) {
	c := spec.name
	if files.Log.Size != spec.size {
		return nil, invalidf("copy of %s: segmentSizeInBytes is %d but %s holds %d bytes", c, spec.size, files.Log.Name, files.Log.Size)
	}
	logCRC := &checkedCRC{r: files.Log.R}
	in := InspectInput{Name: files.Log.Name, Base: c.start, End: spec.end, Log: logCRC, LogSize: files.Log.Size,
		IndexIntervalBytes: s.cfg.IndexIntervalBytes}
	in.OffsetIndex, in.OffsetIndexErr = readSmall(files.OffsetIndex)
	in.TimeIndex, in.TimeIndexErr = readSmall(files.TimeIndex)
	res, err := s.inspect(in)
	if err != nil {
		return nil, fmt.Errorf("copy of %s: %w", c, err)
	}
	// The indexes go up as the bytes checked, not read again.
	if in.OffsetIndexErr == nil {
		files.OffsetIndex = Source{Name: files.OffsetIndex.Name, R: bytes.NewReader(in.OffsetIndex), Size: int64(len(in.OffsetIndex))}
	}
	if in.TimeIndexErr == nil {
		files.TimeIndex = Source{Name: files.TimeIndex.Name, R: bytes.NewReader(in.TimeIndex), Size: int64(len(in.TimeIndex))}
	}
	if !res.IndexesOK {
		if res.Rebuilt == nil {
			return nil, fmt.Errorf("copy of %s: the indexes are unusable (%s) and the check rebuilt none", c, res.IndexProblem)
		}
		s.log.Warn("rsm: the segment's offset and time indexes are unusable: copying indexes rebuilt from its log", "copy", c.String(),
			"check_failed", res.IndexProblem, "offset_index", files.OffsetIndex.Name)
		s.m.rebuiltIndexes.Inc()
		off, tim, err := res.Rebuilt.Encode(c.start)
		if err != nil {
			return nil, fmt.Errorf("copy of %s: encode the rebuilt indexes: %w", c, err)
		}
		files.OffsetIndex = Source{Name: files.OffsetIndex.Name + " (rebuilt)", R: bytes.NewReader(off), Size: int64(len(off))}
		files.TimeIndex = Source{Name: files.TimeIndex.Name + " (rebuilt)", R: bytes.NewReader(tim), Size: int64(len(tim))}
	}
	meta := remotelog.SegmentMetadata{TopicPartition: c.tp, TopicID: spec.topicID, ID: c.id, StartOffset: c.start, EndOffset: spec.end,
		MaxTimestampMs: spec.maxTs, EventTimestampMs: s.now().UnixMilli(), SegmentLeaderEpochs: spec.epochs, SizeInBytes: res.Size,
		State: remotelog.CopySegmentStarted, BrokerID: spec.brokerID, TxnIndexPresent: files.TxnIndex.present(),
		ProducerSnapshotPresent: files.ProducerSnapshot.present()}
	if res.Size < files.Log.Size {
		meta.LocalSizeInBytes = files.Log.Size
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("copy of %s: before the upload: %w", c, context.Cause(ctx))
	}
	row, err := s.cat.BrokerCopy(c.tp, c.start, c.id)
	if err == nil && row.State >= remotelog.DeleteSegmentStarted {
		// A delete of this id came first (the broker's, or of a failed
		// attempt): a copy after it would outlive the broker's delete.
		return nil, invalidf("copy of %s: this copy was deleted (row %s); a new copy attempt has a new segment id", c, row.State)
	}
	if err == nil && row.State == remotelog.CopySegmentFinished && sameCopy(row, meta) {
		// The same attempt again, already stored and answered: the broker
		// may have recorded it finished, so it is not made again (a failure
		// of the new attempt would delete the objects it shares with it).
		if ans, ok := s.storedAgain(ctx, c, row); ok {
			return ans, nil
		}
	}
	if err := s.startRow(meta); err != nil {
		return nil, fmt.Errorf("copy of %s: record COPY_SEGMENT_STARTED: %w", c, inCatalogue(err))
	}
	crashpoint.Hit("rsm-copy.started")
	mf, err := s.st.Copy(ctx, meta, files)
	if err != nil {
		err = inStore(storedNotFound(err))
	} else if err = logCRC.verify(mf.Objects[kafkalog.LogSuffix].CRC32C, res.Size, res.FileSize); err == nil {
		crashpoint.Hit("rsm-copy.uploaded")
		if err = inStore(storedNotFound(s.st.VerifyPresent(ctx, mf))); err == nil {
			_, err = s.cat.SetBrokerCopyState(c.tp, c.start, c.id, remotelog.CopySegmentFinished)
			err = inCatalogue(err)
		}
	}
	if err != nil {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
			err = fmt.Errorf("%w (%w)", err, cause)
		}
		s.discard(meta, "its request failed: "+err.Error())
		return nil, fmt.Errorf("copy of %s: %w", c, err)
	}
	crashpoint.Hit("rsm-copy.finished")
	s.manifests.Put(c.id, mf)
	return &copyAnswer{CustomMetadata: customMetadata(meta.TxnIndexPresent, meta.ProducerSnapshotPresent), Bytes: res.Size}, nil
}

// sameCopy reports whether a finished row and a new attempt of the same
// segment id copy the same bytes: the same offsets, size and optional
// objects.
func sameCopy(row, meta remotelog.SegmentMetadata) bool {
	return row.EndOffset == meta.EndOffset && row.SizeInBytes == meta.SizeInBytes && row.LocalSizeInBytes == meta.LocalSizeInBytes &&
		row.TxnIndexPresent == meta.TxnIndexPresent && row.ProducerSnapshotPresent == meta.ProducerSnapshotPresent
}

// storedAgain answers a copy of a segment id already stored whole (its
// manifest and every object it names present at their sizes) as the
// first copy was answered, and false when the stored copy is not whole:
// then it is made again over it.
func (s *Server) storedAgain(ctx context.Context, c copyName, row remotelog.SegmentMetadata) (*copyAnswer, bool) {
	mf, err := s.st.Manifest(ctx, row)
	if err == nil {
		err = s.st.VerifyPresent(ctx, mf)
	}
	if err != nil {
		s.log.Warn("rsm: a copy of a segment id already stored, whose stored copy is not whole: copying it again", "copy", c.String(), "err", err)
		return nil, false
	}
	s.log.Info("rsm: a copy of a segment id already stored: answered from the stored copy", "copy", c.String())
	return &copyAnswer{CustomMetadata: customMetadata(row.TxnIndexPresent, row.ProducerSnapshotPresent), Bytes: row.SizeInBytes}, true
}

// storedNotFound turns a missing object during a copy (one it stored and
// then did not find) into an error that is not a 404: the copy failed,
// the segment is not missing.
func storedNotFound(err error) error {
	if errors.Is(err, rsm.ErrNotFound) {
		return fmt.Errorf("%w: an object of the copy was gone right after its upload: %w", ErrUnavailable, err)
	}
	return err
}

// startRow writes the copy's COPY_SEGMENT_STARTED row. A row of the same
// id (a copy made again over an earlier one) is replaced.
func (s *Server) startRow(meta remotelog.SegmentMetadata) error {
	err := s.cat.PutBrokerCopy(meta)
	if errors.Is(err, rlmm.ErrSegmentExists) {
		if err := s.cat.ForgetBrokerCopy(meta.TopicPartition, meta.StartOffset, meta.ID); err != nil {
			return err
		}
		err = s.cat.PutBrokerCopy(meta)
	}
	s.manifests.Remove(meta.ID)
	return err
}

// readSmall reads an index file whole through its handle.
func readSmall(src Source) ([]byte, error) {
	if src.R == nil {
		return nil, errors.New("absent")
	}
	if src.Size > maxIndexBytes {
		return nil, fmt.Errorf("%s holds %d bytes, more than an index may (%d)", src.Name, src.Size, int64(maxIndexBytes))
	}
	buf := make([]byte, src.Size)
	if _, err := src.R.ReadAt(buf, 0); err != nil && !(errors.Is(err, io.EOF) && src.Size == 0) {
		return nil, fmt.Errorf("read %s: %w", src.Name, err)
	}
	return buf, nil
}

// maxIndexBytes bounds an index file (Kafka's segment.index.bytes is an
// int, 10 MiB by default), and so every index object tierd stores: the
// plugin takes no larger index answer.
const maxIndexBytes = 1 << 30
