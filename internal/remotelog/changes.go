package remotelog

// Version names the state of one partition's finished rows and offsets in
// a metadata store, so that a reader holding a copy of them can tell
// whether, and how, they changed since (rlmm.Store.PartitionVersion and
// ChangesSince). Versions are compared with ==; their fields mean nothing
// outside the store that made them.
type Version struct {
	// Epoch numbers the store's open Pebble instance: a reader's copy
	// from another instance is reloaded.
	Epoch uint64
	// Gen is the store-wide write number of the partition's last change
	// in this process, 0 when it has none.
	Gen uint64
}

// Change is one write's effect on one partition's finished
// (COPY_SEGMENT_FINISHED) rows and offsets, as the values written, so
// that applying it twice, or to a copy that already has it, gives the
// same result. A write that changed only other rows of the partition (a
// COPY_SEGMENT_STARTED or DELETE_SEGMENT_* row) is an empty Change.
type Change struct {
	// Offsets are the partition's offsets after the write; nil when the
	// write left them as they were.
	Offsets *PartitionOffsets
	// Finished are the finished rows the write set or removed, in the
	// order written.
	Finished []FinishedOp
}

// FinishedOp sets or removes one finished row, named by its start offset
// and segment id (the row's key).
type FinishedOp struct {
	StartOffset int64
	ID          SegmentID
	// Row is the row as written, nil when it left the finished rows. It is
	// shared: read it, never modify it.
	Row *SegmentMetadata
}
