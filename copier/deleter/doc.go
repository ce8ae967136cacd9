// Package deleter is the one remote-delete protocol that retention,
// superseded copies, remote compaction and the clean-up of failed or dead
// copies go through:
//
//	ProofPresent       the copy that is the proof checked in the bucket right before
//	DeleteSuperseded   superseded copies, each once its proof is present
//	Group, DeleteAll   DELETE_SEGMENT_STARTED for a group of rows in one synced
//	                   write, then each copy's objects (manifest first), then
//	                   DELETE_SEGMENT_FINISHED in one synced write for those gone
//	Discard            a failed or cut-off copy: its uploads aborted by exact key too
//	AbortUploads       the incomplete uploads of deleted copies, one listing a partition
//	DeleteObjects      a copy's objects alone, for a deletion journaled elsewhere
//	CleanupUnfinished  rows a previous pass or process left STARTED
//	Abandon            a copy fenced after its manifest: its row forgotten, its
//	                   objects left to the new leader
//
// It works on a 4-method Store and a 4-method Bucket; the copier hands it
// its copy check, metrics and sweep request. The whole-partition deletion
// (copier's partitionDeletions) keeps its own journal instead of rows: it
// deletes the objects the journal names through DeleteObjects and aborts
// their uploads through AbortUploads.
package deleter
