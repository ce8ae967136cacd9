package rsmapi

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"

	"github.com/tierd/tierd/internal/kafkalog"
)

// maxUploadFileBytes bounds each file of a copy by upload: a .log is at
// most Kafka's segment.bytes (an int), an index at most maxIndexBytes.
const maxUploadFileBytes = math.MaxInt32

// receiveUpload reads a copy by upload (see the package doc): a 4-byte
// big-endian length n (at most maxJSONBytes), n bytes of JSON with the
// files' sizes, then the files' bytes one after another (.log, offset
// index, time index, then the transaction index and the producer
// snapshot when present), and nothing after them. Each file is spooled
// into the staging dir and then read only through the handle it was
// written with; the staged files are unlinked at once, so nothing is
// left behind whatever happens. A body that ends early, goes on past the
// files, or whose Content-Length disagrees with the sizes is refused
// (ErrInvalid), as are sizes past their limits (ErrTooLarge).
func (s *Server) receiveUpload(ctx context.Context, r *http.Request, c copyName) (*Files, copySpec, func(), error) {
	fail := func(err error) (*Files, copySpec, func(), error) {
		return nil, copySpec{}, nil, fmt.Errorf("copy of %s by upload: %w", c, err)
	}
	body := bufio.NewReaderSize(r.Body, 256<<10)
	var head [4]byte
	if _, err := io.ReadFull(body, head[:]); err != nil {
		return fail(invalidf("the body ends before its 4-byte length: %v", err))
	}
	n := int64(binary.BigEndian.Uint32(head[:]))
	if n > maxJSONBytes {
		return fail(fmt.Errorf("%w: a JSON head of %d bytes, more than %d", ErrTooLarge, n, maxJSONBytes))
	}
	var q copyRequest
	if err := decodeJSON(io.LimitReader(body, n), &q); err != nil {
		return fail(err)
	}
	spec, err := q.spec(c)
	if err != nil {
		return fail(err)
	}
	type part struct {
		kind fileKind
		size *int64
		dst  *Source
	}
	files := &Files{LeaderEpochCheckpoint: spec.checkpoint, LeaderEpochs: spec.epochs}
	parts := []part{{kindLog, q.LogSegmentBytes, &files.Log}, {kindOffsetIndex, q.OffsetIndexBytes, &files.OffsetIndex},
		{kindTimeIndex, q.TimeIndexBytes, &files.TimeIndex}}
	if q.TransactionIndexBytes != nil {
		parts = append(parts, part{kindTxnIndex, q.TransactionIndexBytes, &files.TxnIndex})
	}
	if q.ProducerSnapshotBytes != nil {
		parts = append(parts, part{kindSnapshot, q.ProducerSnapshotBytes, &files.ProducerSnapshot})
	}
	total := 4 + n
	for _, p := range parts {
		if p.size == nil || *p.size < 0 {
			return fail(invalidf("%sBytes must be given and not negative", p.kind))
		}
		limit := int64(maxUploadFileBytes)
		if p.kind != kindLog {
			limit = maxIndexBytes
		}
		if *p.size > limit {
			return fail(fmt.Errorf("%w: %sBytes %d, more than %d", ErrTooLarge, p.kind, *p.size, limit))
		}
		total += *p.size
	}
	if r.ContentLength >= 0 && r.ContentLength != total {
		return fail(invalidf("Content-Length %d, but the head announces %d bytes (4 + %d of JSON + the files)", r.ContentLength, total, n))
	}
	if err := os.MkdirAll(s.cfg.StagingDir, 0o700); err != nil {
		return fail(fmt.Errorf("staging dir: %w", err))
	}
	dir, err := os.MkdirTemp(s.cfg.StagingDir, stagingPrefix+c.id.String()+"-")
	if err != nil {
		return fail(fmt.Errorf("staging dir: %w", err))
	}
	defer os.RemoveAll(dir) // the handles stay valid
	var opened []*os.File
	cleanup := func() {
		for _, f := range opened {
			f.Close()
		}
	}
	read := 4 + n
	for _, p := range parts {
		f, err := os.OpenFile(filepath.Join(dir, p.kind.String()), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			cleanup()
			return fail(fmt.Errorf("staging dir: %w", err))
		}
		opened = append(opened, f)
		got, err := io.Copy(f, io.LimitReader(readerCtx{ctx, body}, *p.size))
		read += got
		if err == nil && got < *p.size {
			err = invalidf("the body ended after %d bytes, in the %s; the head announces %d", read, p.kind, total)
		}
		if err != nil {
			cleanup()
			return fail(err)
		}
		*p.dst = Source{Name: uploadedName(c, p.kind), R: f, Size: *p.size}
	}
	if extra, _ := io.Copy(io.Discard, io.LimitReader(body, 1<<20)); extra > 0 {
		cleanup()
		return fail(invalidf("%d or more bytes after the files: the head announces %d", extra, total))
	}
	return files, spec, cleanup, nil
}

// readerCtx stops reading once ctx ends.
type readerCtx struct {
	ctx context.Context
	r   io.Reader
}

func (r readerCtx) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, context.Cause(r.ctx)
	}
	n, err := r.r.Read(p)
	if errors.Is(err, io.EOF) {
		return n, io.EOF
	}
	return n, err
}

// uploadedName names a file of a copy by upload in messages: the name the
// broker's file has (the snapshot's offset is not sent).
func uploadedName(c copyName, k fileKind) string {
	if k == kindSnapshot {
		return fmt.Sprintf("%s/<offset>%s (uploaded)", c.tp, kafkalog.SnapshotSuffix)
	}
	return fmt.Sprintf("%s/%s (uploaded)", c.tp, kafkalog.FileName(c.start, k.suffix()))
}
