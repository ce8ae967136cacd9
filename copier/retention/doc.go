// Package retention decides what retention deletes, and says why, from a
// partition's state alone: its remote copies (metadata rows), its local
// segments (offsets and sizes), its log start offset, the topic's limits
// and cleanup.policy, and the time. It reads no file, store or bucket.
//
// PlanLocal picks the oldest local segments that may go (each with a
// finished copy, or wholly below the log start offset, and local
// retention breached), PlanRemote the oldest remote copies that breach
// retention (each with the log start offset once it is gone), and
// Superseded the copies a newer copy covers (each with that copy). The
// copier checks each proof in the bucket right before it deletes, moves
// the offsets and runs the delete protocol; the rules of which segment
// or copy is a candidate live here.
package retention
