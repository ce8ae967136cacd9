package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tierd/tierd/config"
	"github.com/tierd/tierd/daemon"
	"github.com/tierd/tierd/internal/kafkalog"
	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm"
	"github.com/tierd/tierd/rsm/chunked"
	"github.com/tierd/tierd/rsmapi"
)

const verifyUsage = "tierd verify --config tierd.yaml [--sample N [--seed S]] [--topic T] [--concurrency N]"

// verifyOptions are the flags of "tierd verify".
type verifyOptions struct {
	sample      int    // 0: every finished copy
	seed        uint64 // of the sample
	topic       string // "": every topic
	concurrency int    // copies read at once
	tty         bool   // draw a progress bar (stderr is a terminal)
}

func runVerify(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := verifyOptions{tty: isTerminal(stderr)}
	cfg, code, ok := configCommand("verify", verifyUsage, args, stderr, func(fs *flag.FlagSet) {
		fs.IntVar(&o.sample, "sample", 0, "verify this many finished copies, picked at random; 0 = all")
		fs.Uint64Var(&o.seed, "seed", 0, "seed of --sample's random pick; 0 = drawn from the clock (the header names it)")
		fs.StringVar(&o.topic, "topic", "", "verify only this topic's copies")
		fs.IntVar(&o.concurrency, "concurrency", 4, "copies read at once")
	})
	if !ok {
		return code
	}
	if o.sample < 0 || o.concurrency < 1 {
		fmt.Fprintf(stderr, "tierd verify: --sample must be >= 0 and --concurrency >= 1\nusage: %s\n", verifyUsage)
		return 2
	}
	if o.seed != 0 && o.sample == 0 {
		fmt.Fprintf(stderr, "tierd verify: --seed picks a --sample; without --sample every copy is verified\nusage: %s\n", verifyUsage)
		return 2
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	res, err := verifyCopies(ctx, cfg, o, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "tierd verify: %v\n", err)
		return 1
	}
	if res.failed() {
		return 1
	}
	return 0
}

// verifyItem is one finished copy to verify.
type verifyItem struct {
	meta   remotelog.SegmentMetadata
	mf     *rsm.Manifest // read before the objects
	broker bool          // a broker-owned copy (under the RSM endpoint's prefix)
}

// verifyResult counts the outcomes. Failures are mismatched (an object's
// size or checksum is not the manifest's, or the manifest does not describe
// the row), missing (an object or the manifest is gone while the row is
// still finished) and unreadable (the store did not answer). Gone copies
// were deleted (retention) between the listing and their reading: no
// failure.
type verifyResult struct {
	copies, ok, mismatched, missing, unreadable, gone int
	chunked                                           int   // of ok: in chunked form, every chunk decoded and checked
	bytes                                             int64 // stored bytes read
	elapsed                                           time.Duration
}

func (r verifyResult) failed() bool { return r.mismatched+r.missing+r.unreadable > 0 }

func (r verifyResult) String() string {
	chunked := ""
	if r.chunked > 0 {
		chunked = fmt.Sprintf("; of the ok, %d in chunked form, every chunk decoded and checked", r.chunked)
	}
	return fmt.Sprintf("verified %d %s, %s stored read in %s: %d ok, %d mismatched, %d missing objects, %d unreadable, %d deleted while verifying%s",
		r.copies, copiesWord(r.copies), humanBytes(r.bytes), r.elapsed.Round(time.Millisecond), r.ok, r.mismatched, r.missing, r.unreadable, r.gone, chunked)
}

// verifyCopies lists the finished copies (from the running tierd, or the
// stopped one's metadata), reads each copy's manifest, then every object
// of it, checking sizes and checksums (CRC-32C, or SHA-256 in manifests of
// format version 1), and of a copy in chunked form every chunk decoded and
// checked (rsm.Manager.VerifyObjectIn).
// Each failure is a line on stdout; the summary line ends the output.
func verifyCopies(ctx context.Context, cfg config.Config, o verifyOptions, stdout, stderr io.Writer) (verifyResult, error) {
	start := time.Now()
	var res verifyResult
	ls, source, closeFn, err := remoteLister(ctx, cfg)
	if err != nil {
		return res, err
	}
	defer closeFn()
	b, err := daemon.OpenBucket(ctx, cfg.Bucket)
	if err != nil {
		return res, err
	}
	defer b.Close()
	if err := checkBucket(ctx, b, cfg.Bucket.Prefix); err != nil {
		return res, err
	}
	mc, err := daemon.ManagerConfig(cfg.Objects, cfg.Bucket.Prefix)
	if err != nil {
		return res, err
	}
	m, err := rsm.NewManager(b, mc)
	if err != nil {
		return res, err
	}
	bm, err := rsm.NewManager(b, rsm.Config{Prefix: rsmapi.BrokerPrefix(cfg.Bucket.Prefix, cfg.RSM.Prefix)})
	if err != nil {
		return res, err
	}
	broker, badManifests, err := brokerCopiesToVerify(ctx, bm, o.topic)
	if err != nil {
		return res, err
	}
	items, listed, err := finishedCopies(ctx, ls, o, broker)
	if err != nil {
		return res, err
	}
	picked := ""
	if len(items) < listed {
		// The seed repeats the pick: --sample N --seed S.
		picked = fmt.Sprintf(" (a random %d of %d, --seed %d)", len(items), listed, o.seed)
	}
	fmt.Fprintf(stderr, "tierd verify: %d finished %s%s from %s, bucket %s%s\n", len(items), copiesWord(len(items)), picked, source, b.Name(),
		brokerText(items, rsmapi.BrokerPrefix(cfg.Bucket.Prefix, cfg.RSM.Prefix)))
	if picked != "" {
		fmt.Fprintf(stderr, "tierd verify: picked %s\n", pickedList(items))
	}

	// Manifests first: they give the bytes to read, for the progress.
	var total int64
	var toRead []verifyItem
	report := func(p *progress, kind string, it verifyItem, err error) {
		owner := ""
		if it.broker {
			owner = " (broker's)"
		}
		line := fmt.Sprintf("%s %s%s base offset %d segment %s: %v", kind, it.meta.TopicPartition, owner, it.meta.StartOffset, it.meta.ID, err)
		if p == nil {
			fmt.Fprintln(stdout, line)
			return
		}
		p.println(stdout, line)
	}
	for _, err := range badManifests {
		res.copies++
		res.mismatched++
		fmt.Fprintf(stdout, "MISMATCH broker-owned copy: %v\n", err)
	}
	mgrOf := func(it verifyItem) *rsm.Manager {
		if it.broker {
			return bm
		}
		return m
	}
	for _, it := range items {
		res.copies++
		mf, err := mgrOf(it).ReadManifest(ctx, mgrOf(it).Key(it.meta, ".manifest.json"))
		if err == nil {
			err = sameCopy(mf, it.meta)
		}
		if err != nil {
			kind := classify(ctx, ls, bm, it, err, &res)
			if kind != "" {
				report(nil, kind, it, err)
			}
			continue
		}
		it.mf = mf
		for _, obj := range mf.Objects {
			total += obj.Size
		}
		toRead = append(toRead, it)
	}

	p := newProgress(stderr, o.tty, "copies", len(toRead), total)
	stopTicks := make(chan struct{})
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		every := plainEvery
		if o.tty {
			every = barEvery
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stopTicks:
				return
			case <-t.C:
				p.tick()
			}
		}
	}()
	var mu sync.Mutex // guards res below
	work := make(chan verifyItem)
	var wg sync.WaitGroup
	for range o.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range work {
				err := verifyOne(ctx, mgrOf(it), it, p.add)
				mu.Lock()
				if err == nil {
					res.ok++
					if it.meta.Form != "" {
						res.chunked++
					}
				} else if kind := classify(ctx, ls, bm, it, err, &res); kind != "" {
					report(p, kind, it, err)
				}
				mu.Unlock()
				p.finish()
			}
		}()
	}
	for _, it := range toRead {
		if ctx.Err() != nil {
			break
		}
		work <- it
	}
	close(work)
	wg.Wait()
	close(stopTicks)
	<-ticked
	p.close()
	res.bytes, res.elapsed = p.bytes, time.Since(start)
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("stopped after %d of %d copies: %w", p.done, len(toRead), err)
	}
	fmt.Fprintln(stdout, res.String())
	return res, nil
}

// finishedCopies lists the COPY_SEGMENT_FINISHED rows (of o.topic, when
// set) and the broker-owned copies given, or a random o.sample of them
// all, ordered by partition and offset, and returns them with the number
// listed before the sample was drawn. Errors: o.topic names no partition
// of the metadata and no broker-owned copy (the error lists the topics
// it holds), listing errors.
func finishedCopies(ctx context.Context, ls lister, o verifyOptions, broker []verifyItem) ([]verifyItem, int, error) {
	tps, err := ls.partitions(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("list partitions: %w", err)
	}
	if o.topic != "" && !slices.ContainsFunc(tps, func(tp remotelog.TopicPartition) bool { return tp.Topic == o.topic }) && len(broker) == 0 {
		return nil, 0, fmt.Errorf("topic %q has no partition in tierd's metadata; it holds %s; and no broker-owned copy of it is stored", o.topic, topicList(tps))
	}
	items := broker
	for _, tp := range tps {
		if o.topic != "" && tp.Topic != o.topic {
			continue
		}
		resp, err := ls.list(ctx, tp)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", tp, err)
		}
		for _, s := range resp.GetSegments() {
			if s.State != remotelog.CopySegmentFinished.String() {
				continue
			}
			id, err := remotelog.ParseSegmentID(s.SegmentId)
			if err != nil {
				return nil, 0, fmt.Errorf("%s: segment id %q: %w", tp, s.SegmentId, err)
			}
			items = append(items, verifyItem{meta: remotelog.SegmentMetadata{TopicPartition: tp, ID: id,
				StartOffset: s.StartOffset, EndOffset: s.EndOffset, SizeInBytes: s.SizeInBytes, Form: s.GetForm(),
				StoredSizeInBytes: s.GetStoredSizeInBytes(), Encrypted: s.GetEncrypted()}})
		}
	}
	listed := len(items)
	if o.sample > 0 && o.sample < len(items) {
		r := rand.New(rand.NewPCG(o.seed, 0))
		r.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
		items = items[:o.sample]
	}
	sort.Slice(items, func(i, j int) bool {
		a, b := items[i].meta, items[j].meta
		if a.TopicPartition != b.TopicPartition {
			return a.TopicPartition.String() < b.TopicPartition.String()
		}
		return a.StartOffset < b.StartOffset
	})
	return items, listed, nil
}

// pickedList names sampled copies by partition and base offset, in
// their order: "demo-0 at 0, 205; demo-1 at 410".
func pickedList(items []verifyItem) string {
	var b strings.Builder
	for i, it := range items {
		switch {
		case i == 0:
			fmt.Fprintf(&b, "%s at %d", it.meta.TopicPartition, it.meta.StartOffset)
		case it.meta.TopicPartition != items[i-1].meta.TopicPartition:
			fmt.Fprintf(&b, "; %s at %d", it.meta.TopicPartition, it.meta.StartOffset)
		default:
			fmt.Fprintf(&b, ", %d", it.meta.StartOffset)
		}
	}
	return b.String()
}

// topicList names the topics of tps, sorted, at most 10 of them, or says
// there are none.
func topicList(tps []remotelog.TopicPartition) string {
	var topics []string
	for _, tp := range tps {
		topics = append(topics, tp.Topic)
	}
	slices.Sort(topics)
	topics = slices.Compact(topics)
	switch {
	case len(topics) == 0:
		return "no topic"
	case len(topics) > 10:
		return fmt.Sprintf("%d topics: %s, ...", len(topics), strings.Join(topics[:10], ", "))
	}
	if len(topics) == 1 {
		return "topic " + topics[0]
	}
	return "topics " + strings.Join(topics, ", ")
}

// errManifestDiffers marks a manifest that does not describe its row.
var errManifestDiffers = errors.New("the manifest does not describe the metadata row")

// sameCopy checks that a manifest is the row's copy: segment id,
// partition, offsets and .log size.
func sameCopy(mf *rsm.Manifest, meta remotelog.SegmentMetadata) error {
	if mf.SegmentID != meta.ID || mf.Topic != meta.TopicPartition.Topic || mf.Partition != meta.TopicPartition.Partition ||
		mf.StartOffset != meta.StartOffset || mf.EndOffset != meta.EndOffset || mf.SizeInBytes != meta.SizeInBytes {
		return fmt.Errorf("%w: manifest %s-%d offsets %d-%d, %d bytes; row offsets %d-%d, %d bytes", errManifestDiffers,
			mf.Topic, mf.Partition, mf.StartOffset, mf.EndOffset, mf.SizeInBytes, meta.StartOffset, meta.EndOffset, meta.SizeInBytes)
	}
	if mf.Form() != meta.Form || meta.Encrypted && mf.Encryption == nil {
		return fmt.Errorf("%w: manifest of form %q (encrypted %t); row of form %q (encrypted %t)", errManifestDiffers,
			mf.Form(), mf.Encryption != nil, meta.Form, meta.Encrypted)
	}
	return nil
}

// verifyOne re-reads every object of a copy, the .log first.
func verifyOne(ctx context.Context, m *rsm.Manager, it verifyItem, onRead func(int64)) error {
	suffixes := make([]string, 0, len(it.mf.Objects))
	for s := range it.mf.Objects {
		suffixes = append(suffixes, s)
	}
	sort.Slice(suffixes, func(i, j int) bool {
		return suffixes[i] == kafkalog.LogSuffix || (suffixes[j] != kafkalog.LogSuffix && suffixes[i] < suffixes[j])
	})
	for _, s := range suffixes {
		if err := m.VerifyObjectIn(ctx, it.mf, s, onRead); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// classify counts a failed copy in res and returns how to report it:
// MISMATCH, MISSING or UNREADABLE, or "" for a copy retention deleted
// meanwhile (its row is no longer finished), which is not reported.
func classify(ctx context.Context, ls lister, bm *rsm.Manager, it verifyItem, err error, res *verifyResult) string {
	switch {
	case errors.Is(err, rsm.ErrChecksum), errors.Is(err, errManifestDiffers), errors.Is(err, rsm.ErrBadManifest), errors.Is(err, chunked.ErrDamaged),
		errors.Is(err, chunked.ErrBadMAC):
		res.mismatched++
		return "MISMATCH"
	case errors.Is(err, rsm.ErrNotFound):
		if it.broker && !brokerStillStored(ctx, bm, it.meta) || !it.broker && !stillFinished(ctx, ls, it.meta) {
			res.gone++
			return ""
		}
		res.missing++
		return "MISSING"
	}
	res.unreadable++
	return "UNREADABLE"
}

// stillFinished asks again whether the copy's row is COPY_SEGMENT_FINISHED;
// when that cannot be told, it says yes (the copy is reported).
func stillFinished(ctx context.Context, ls lister, meta remotelog.SegmentMetadata) bool {
	resp, err := ls.list(ctx, meta.TopicPartition)
	if err != nil {
		return true
	}
	for _, s := range resp.GetSegments() {
		if s.SegmentId == meta.ID.String() {
			return s.State == remotelog.CopySegmentFinished.String()
		}
	}
	return false
}

// copiesWord is "copy" for one, "copies" otherwise.
func copiesWord(n int) string {
	if n == 1 {
		return "copy"
	}
	return "copies"
}
