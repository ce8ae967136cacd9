package rsmapi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rlmm"
)

// janitorInterval is the time between the janitor's passes.
const janitorInterval = time.Minute

// DeletedRowsKept is how long the rows of deleted copies
// (DELETE_SEGMENT_FINISHED) are kept for tierd's tools, then forgotten.
const DeletedRowsKept = time.Hour

// Proofs of the janitor's deletes (see the package doc).
const (
	proofStartedAtStart = "its row was COPY_SEGMENT_STARTED when tierd started: the request that wrote it never got success " +
		"(tierd answers a copy only once its row is COPY_SEGMENT_FINISHED), so the broker never recorded it COPY_SEGMENT_FINISHED"
	proofStartedIdle = "its row is COPY_SEGMENT_STARTED and no copy of it is in flight: the request that wrote it failed " +
		"(its own clean-up did not finish), so the broker never recorded it COPY_SEGMENT_FINISHED"
	proofDeleteStarted = "its row is DELETE_SEGMENT_STARTED: a delete began (the broker's, or of a failed attempt, on its proof) and did not finish"
)

// janitor finishes what failed requests left: at start, and then every
// janitorInterval, until ctx ends. See sweep.
func (s *Server) janitor(ctx context.Context) {
	s.sweep(ctx, true)
	t := time.NewTicker(janitorInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.sweep(ctx, false)
		}
	}
}

// sweep makes one pass over the catalogue: it deletes the objects of
// copy attempts whose request never got success (rows still
// COPY_SEGMENT_STARTED with no copy in flight) and finishes deletes that
// began (rows DELETE_SEGMENT_STARTED), each under its id's lock (skipped
// while a request holds it) and after reading its row again; it forgets
// the rows of copies deleted more than DeletedRowsKept ago. At start, an
// empty catalogue is rebuilt from the manifests under the prefix first
// (tierd's metadata was lost). Failures are logged; the next pass tries
// again.
func (s *Server) sweep(ctx context.Context, atStart bool) {
	tps, err := s.cat.BrokerPartitions()
	if err != nil {
		s.log.Warn("rsm: janitor: list the partitions of broker-owned copies", "err", err)
		return
	}
	if atStart && len(tps) == 0 {
		if n, err := s.Rebuild(ctx); err != nil {
			s.log.Warn("rsm: rebuild of the catalogue of broker-owned copies from their manifests", "restored", n, "err", err)
		} else if n > 0 {
			s.log.Info("rsm: the catalogue of broker-owned copies was empty: rebuilt from their manifests", "restored", n)
		}
		return
	}
	for _, tp := range tps {
		rows, err := s.cat.BrokerCopies(tp)
		if err != nil {
			s.log.Warn("rsm: janitor: read the rows of broker-owned copies", "partition", tp.String(), "err", err)
			continue
		}
		for _, row := range rows {
			if ctx.Err() != nil {
				return
			}
			switch row.State {
			case remotelog.CopySegmentStarted:
				proof := proofStartedIdle
				if atStart {
					proof = proofStartedAtStart
				}
				s.clean(ctx, row, proof)
			case remotelog.DeleteSegmentStarted:
				s.clean(ctx, row, proofDeleteStarted)
			}
		}
		if _, err := s.cat.PurgeBrokerCopies(tp, s.now().Add(-DeletedRowsKept).UnixMilli()); err != nil {
			s.log.Warn("rsm: janitor: forget the rows of deleted copies", "partition", tp.String(), "err", err)
		}
	}
}

// clean deletes one row's copy on proof, when nobody works on its id and
// the row, read again under the id's lock, is still in the state seen.
func (s *Server) clean(ctx context.Context, seen remotelog.SegmentMetadata, proof string) {
	release, ok := s.flights.tryAcquire(seen.ID)
	if !ok {
		return
	}
	defer release()
	row, err := s.cat.BrokerCopy(seen.TopicPartition, seen.StartOffset, seen.ID)
	if err != nil || row.State != seen.State {
		return
	}
	dctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	if err := s.deleteCopy(dctx, row, proof); err != nil {
		s.log.Warn("rsm: janitor: delete of a broker-owned copy failed; the next pass tries again", "copy", seen.ID.String(),
			"partition", seen.TopicPartition.String(), "err", err)
		return
	}
	if row.State == remotelog.CopySegmentStarted {
		s.m.discarded.Inc()
	}
}

// Rebuild restores the catalogue from the manifests under the prefix:
// each manifest without a row becomes a COPY_SEGMENT_FINISHED row (a
// copy is complete once its manifest is stored). It returns how many
// rows it wrote. The broker's own metadata decides what happens to them:
// they are kept until it deletes them. Errors: the store's (unreadable
// manifests among them, after the rest are restored), the catalogue's.
func (s *Server) Rebuild(ctx context.Context) (int, error) {
	tps, err := s.st.Partitions(ctx)
	if err != nil {
		return 0, inStore(err)
	}
	n := 0
	var errs []error
	for _, tp := range tps {
		mfs, err := s.st.Manifests(ctx, tp)
		if err != nil {
			errs = append(errs, inStore(err))
		}
		for _, mf := range mfs {
			meta := mf.Metadata()
			if _, err := s.cat.BrokerCopy(meta.TopicPartition, meta.StartOffset, meta.ID); !errors.Is(err, rlmm.ErrSegmentNotFound) {
				if err != nil {
					errs = append(errs, inCatalogue(err))
				}
				continue
			}
			if err := s.cat.PutBrokerCopy(meta); err != nil {
				return n, fmt.Errorf("restore the row of %s copy %s: %w", meta.TopicPartition, meta.ID, inCatalogue(err))
			}
			n++
		}
	}
	return n, errors.Join(errs...)
}

// stagingPrefix starts the name of every entry tierd makes in
// rsm.staging_dir.
const stagingPrefix = "rsm-upload-"

// clearStaging removes what copies by upload of an earlier run left in
// the staging dir (a crash mid-copy), and only that.
func (s *Server) clearStaging() error {
	ents, err := os.ReadDir(s.cfg.StagingDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), stagingPrefix) {
			errs = append(errs, os.RemoveAll(filepath.Join(s.cfg.StagingDir, e.Name())))
		}
	}
	return errors.Join(errs...)
}
