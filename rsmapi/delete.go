package rsmapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rlmm"
)

// handleDelete is DELETE C.
//
// Behavior:
//   - A copy in flight for the same segment id is ended first (it deletes
//     what it stored), then the id's lock is taken.
//   - The row, when tierd has one, goes DELETE_SEGMENT_STARTED; every
//     object of the copy is deleted by key, the manifest first, and its
//     incomplete multipart uploads aborted by their exact keys; the row
//     goes DELETE_SEGMENT_FINISHED.
//   - 204 whether or not anything was there. Without a row (tierd's
//     metadata lost) the keys still follow from C.
func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) {
	began := time.Now()
	c, err := parseName(r)
	if err != nil {
		s.fail(w, opDelete, nil, err, began)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	if s.flights.endCopy(c.id) {
		s.log.Info("rsm: a DELETE ends the copy of the same id in flight", "copy", c.String())
	}
	release, err := s.flights.acquire(ctx, c.id, nil)
	if err != nil {
		s.fail(w, opDelete, &c.tp, fmt.Errorf("%w: delete of %s: wait for the work on the same id: %w", ErrUnavailable, c, err), began)
		return
	}
	defer release()
	meta := c.meta()
	if row, err := s.cat.BrokerCopy(c.tp, c.start, c.id); err == nil {
		meta = row
	}
	if err := s.deleteCopy(ctx, meta, "the broker asked (deleteLogSegmentData)"); err != nil {
		s.fail(w, opDelete, &c.tp, fmt.Errorf("delete of %s: %w", c, err), began)
		return
	}
	w.WriteHeader(http.StatusNoContent)
	s.m.observe(opDelete, &c.tp, "OK", false, began)
}

// deleteCopy deletes one copy's objects, with its row's states around
// it: DELETE_SEGMENT_STARTED before (when there is a row, and it may
// move there), DELETE_SEGMENT_FINISHED after. proof says why the copy may
// go; it is logged. The caller holds the id's lock. Errors: the object
// store's (the objects may be partly deleted: doing it again is safe), a
// row that could not be moved (the objects are deleted).
func (s *Server) deleteCopy(ctx context.Context, meta remotelog.SegmentMetadata, proof string) error {
	c := copyName{tp: meta.TopicPartition, start: meta.StartOffset, id: meta.ID}
	s.manifests.Remove(c.id)
	_, rowErr := s.cat.SetBrokerCopyState(c.tp, c.start, c.id, remotelog.DeleteSegmentStarted)
	noRow := errors.Is(rowErr, rlmm.ErrSegmentNotFound)
	if errors.Is(rowErr, remotelog.ErrIllegalTransition) {
		rowErr = nil // DELETE_SEGMENT_FINISHED already: the objects are deleted again, idempotently
	}
	s.log.Info("rsm: deleting a broker-owned copy", "copy", c.String(), "proof", proof, "row", rowText(rowErr, noRow))
	if err := s.st.Delete(ctx, meta); err != nil {
		return inStore(err)
	}
	n, err := s.st.AbortUploads(ctx, meta)
	if err != nil {
		return inStore(err)
	}
	if n > 0 {
		s.log.Info("rsm: aborted the copy's incomplete multipart uploads", "copy", c.String(), "uploads", n)
	}
	if noRow {
		s.recordDelete(meta)
		return nil
	}
	if rowErr != nil {
		return fmt.Errorf("the objects are deleted but the row could not be marked DELETE_SEGMENT_STARTED: %w", inCatalogue(rowErr))
	}
	if _, err := s.cat.SetBrokerCopyState(c.tp, c.start, c.id, remotelog.DeleteSegmentFinished); err != nil && !errors.Is(err, remotelog.ErrIllegalTransition) {
		return fmt.Errorf("the objects are deleted but the row could not be marked DELETE_SEGMENT_FINISHED: %w", inCatalogue(err))
	}
	return nil
}

// recordDelete writes a DELETE_SEGMENT_FINISHED row for a copy deleted
// without a row (one ended before it wrote its row, or tierd's metadata
// was lost), so that a copy of the same id arriving after the delete is
// refused as for any deleted copy (runCopy); it goes with the other rows
// of deleted copies after DeletedRowsKept. The objects are deleted
// whether or not it is written.
func (s *Server) recordDelete(meta remotelog.SegmentMetadata) {
	meta.State = remotelog.DeleteSegmentFinished
	meta.EndOffset = max(meta.EndOffset, meta.StartOffset)
	if err := s.cat.PutBrokerCopy(meta); err != nil && !errors.Is(err, rlmm.ErrSegmentExists) {
		s.log.Warn("rsm: could not record the delete of a copy tierd had no row for; a copy of the same id would not be refused",
			"copy", meta.ID.String(), "partition", meta.TopicPartition.String(), "err", err)
	}
}

func rowText(err error, noRow bool) string {
	switch {
	case noRow:
		return "none (keys from the request)"
	case err != nil:
		return "not updated: " + err.Error()
	}
	return "DELETE_SEGMENT_STARTED"
}

// discard deletes what a failed copy attempt stored, now, under a context
// of its own (the request's may have ended). What it cannot delete (the
// store does not answer) the janitor deletes later: the row stays in a
// state that says so.
func (s *Server) discard(meta remotelog.SegmentMetadata, why string) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	defer cancel()
	if err := s.deleteCopy(ctx, meta, "the attempt failed before tierd answered it (the broker never recorded it COPY_SEGMENT_FINISHED): "+why); err != nil {
		s.log.Warn("rsm: could not delete what a failed copy attempt stored; tierd tries again", "copy", meta.ID.String(), "err", err)
		return
	}
	s.m.discarded.Inc()
}
