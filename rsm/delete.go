package rsm

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/tierd/tierd/internal/remotelog"
)

// DeleteSegment deletes every object of a copy, the manifest first so that
// a half-deleted copy never looks complete: seven deletes by key, the keys
// following from meta (see Key). Missing objects are fine. It lists
// nothing, so its cost does not grow with the bucket or the partition;
// the copy's incomplete multipart uploads, which only an interrupted
// upload leaves, are aborted by AbortUploads, once for all the copies of
// a partition deleted together, or by AbortUploadsOf, by exact key.
func (m *Manager) DeleteSegment(ctx context.Context, meta remotelog.SegmentMetadata) error {
	for _, k := range m.copyKeys(meta) {
		if err := m.b.Delete(ctx, k); err != nil {
			return fmt.Errorf("delete %s: %w", k, err)
		}
	}
	return nil
}

// copyKeys returns the keys of every object a copy may have, the manifest
// first.
func (m *Manager) copyKeys(meta remotelog.SegmentMetadata) []string {
	keys := []string{m.Key(meta, manifestSuffix), m.Key(meta, logSuffix)}
	for _, t := range []remotelog.IndexType{remotelog.OffsetIndex, remotelog.TimeIndex, remotelog.TransactionIndex,
		remotelog.ProducerSnapshot, remotelog.LeaderEpochIndex} {
		keys = append(keys, m.Key(meta, t.Suffix()))
	}
	return keys
}

// AbortUploadsOf aborts the incomplete multipart uploads of a copy: of
// each of its seven object keys (those DeleteSegment deletes), by that
// exact key (MultipartBucket.AbortUploadsOfKey), listing nothing wider,
// neither the partition nor the bucket. It finds what AbortUploads and
// SweepPartition may not: MinIO's listings by prefix and of the whole
// bucket show only uploads its running process began, so an upload a
// store outage cut off (the process restarted since) is found by its
// exact key alone. Call it for a copy with no upload in flight (its copy
// failed or was cut off, or it is being deleted): it would abort that
// upload. It costs seven listings of one key each (and one abort per
// upload found), whatever the size of the bucket. It returns how many
// uploads it aborted; a bucket without multipart uploads has none.
// Errors: the bucket's, wrapped with the key (the keys after it are not
// tried).
func (m *Manager) AbortUploadsOf(ctx context.Context, meta remotelog.SegmentMetadata) (int, error) {
	mb, ok := m.b.(MultipartBucket)
	if !ok {
		return 0, nil
	}
	n := 0
	for _, k := range m.copyKeys(meta) {
		aborted, err := mb.AbortUploadsOfKey(ctx, k)
		n += aborted
		if err != nil {
			return n, fmt.Errorf("abort the incomplete uploads of %s: %w", k, err)
		}
	}
	return n, nil
}

// AbortUploads aborts the incomplete multipart uploads of the copies of
// tp whose segment ids are in ids (copies being, or just, deleted; none
// of them may have an upload in flight), and leaves every other upload
// alone: an upload is the copy's when its key, in this layout, names the
// copy's segment id. It lists the partition's uploads once, whatever the
// number of copies, and then aborts each affected copy's (one listing and
// abort per copy that has any; normally none). It returns how many copies
// had uploads aborted (and, after an error, how many were done). A bucket
// without multipart uploads has nothing to abort. Errors: the bucket's
// listing or abort error, wrapped with the prefix.
func (m *Manager) AbortUploads(ctx context.Context, tp remotelog.TopicPartition, ids map[remotelog.SegmentID]bool) (int, error) {
	mb, ok := m.b.(MultipartBucket)
	if !ok || len(ids) == 0 {
		return 0, nil
	}
	prefix := m.PartitionPrefix(tp)
	ups, err := mb.IncompleteUploads(ctx, prefix)
	if err != nil {
		return 0, fmt.Errorf("list incomplete uploads under %s: %w", prefix, err)
	}
	var stems []string
	seen := map[string]bool{}
	for _, k := range ups {
		base, id, _, ok := ParseKey(k)
		if !ok || !ids[id] || path.Dir(k)+"/" != prefix {
			continue
		}
		stem := fmt.Sprintf("%s%020d-%s", prefix, base, id)
		if !seen[stem] {
			seen[stem] = true
			stems = append(stems, stem)
		}
	}
	sort.Strings(stems)
	for i, stem := range stems {
		if err := mb.AbortIncompleteUploads(ctx, stem); err != nil {
			return i, fmt.Errorf("abort incomplete uploads of %s: %w", stem, err)
		}
	}
	return len(stems), nil
}

func (m *Manager) deleteObjects(ctx context.Context, mf *Manifest) {
	for _, o := range mf.Objects {
		_ = m.b.Delete(ctx, o.Key)
	}
}

// SweepPartition deletes the objects of a partition's copies that keep
// rejects, and aborts the partition's incomplete multipart uploads. keep is
// asked once per segment id found, with whether that copy's manifest is
// present. Call it only when no copy of the partition is in flight. It
// returns the number of objects deleted; keys that do not follow the
// layout are left alone.
func (m *Manager) SweepPartition(ctx context.Context, tp remotelog.TopicPartition, keep func(id remotelog.SegmentID, hasManifest bool) bool) (int, error) {
	prefix := m.PartitionPrefix(tp)
	byID := map[remotelog.SegmentID][]string{}
	manifests := map[remotelog.SegmentID]bool{}
	err := m.b.Iter(ctx, prefix, func(key string) error {
		if _, id, suffix, ok := ParseKey(key); ok {
			byID[id] = append(byID[id], key)
			manifests[id] = manifests[id] || suffix == manifestSuffix
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	var doomed []string
	for id, keys := range byID {
		if !keep(id, manifests[id]) {
			doomed = append(doomed, keys...)
		}
	}
	// Manifests first, so a half-swept copy never looks complete.
	sort.SliceStable(doomed, func(i, j int) bool {
		return strings.HasSuffix(doomed[i], manifestSuffix) && !strings.HasSuffix(doomed[j], manifestSuffix)
	})
	n := 0
	for _, k := range doomed {
		if err := m.b.Delete(ctx, k); err != nil {
			return n, fmt.Errorf("delete %s: %w", k, err)
		}
		n++
	}
	if mb, ok := m.b.(MultipartBucket); ok {
		if err := mb.AbortIncompleteUploads(ctx, prefix); err != nil {
			return n, fmt.Errorf("abort incomplete uploads under %s: %w", prefix, err)
		}
	}
	return n, nil
}
