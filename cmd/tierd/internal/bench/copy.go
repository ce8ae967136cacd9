package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tierd/tierd/copier"
	"github.com/tierd/tierd/rlmm"
	"github.com/tierd/tierd/rsm"
)

// copyCase measures copy and raw_put cfg.Rounds times each. A round
// times each twice, in the order A B B A (A is copy in odd rounds,
// raw_put in even ones), so that neither always follows the other, and
// each timed run starts after a sync(2): the writeback of the run before
// (256 MiB into MinIO's data dir) is not charged to the next one. copy
// is the copier tiering the partition's rolled segments into a new
// metadata store and a prefix of its own, passes until all are finished;
// raw_put uploads the same files (.log, .index, .timeindex of each
// rolled segment) one after another with the same bucket client
// (multipart above its part size). Both rates are over the same bytes,
// the .log files' sizes, a round's rate over its two runs; each Result's
// note lists the rounds' MiB/s, and Series "copy/minio
// copy_over_raw_put" holds the ratio per round.
func (e *env) copyCase(ctx context.Context) (cp, raw *Result, ratio *Series, err error) {
	cp, raw = newResult("copy"), newResult("raw_put")
	ratio = newSeries("copy", "minio", "copy_over_raw_put", []int{len(e.fin)}, e.cfg.Rounds, false)
	var cpRates, rawRates []string
	for r := range e.cfg.Rounds {
		var c, p [2]time.Duration
		ops := []func(run int) error{
			func(run int) (err error) {
				defer e.profile(fmt.Sprintf("copy-%d-%d", r+1, run+1))()
				c[run], err = e.copyOnce(ctx, 2*r+run)
				return err
			},
			func(run int) (err error) {
				defer e.profile(fmt.Sprintf("raw_put-%d-%d", r+1, run+1))()
				p[run], err = e.rawPutOnce(ctx, 2*r+run)
				return err
			},
		}
		first := r % 2
		for k, op := range []int{first, 1 - first, 1 - first, first} {
			syscall.Sync()
			if err := ops[op](k / 2); err != nil {
				return nil, nil, nil, err
			}
		}
		n := e.tieredBytes()
		ct, pt := c[0]+c[1], p[0]+p[1]
		for run := range 2 {
			cp.add(c[run], n)
			raw.add(p[run], n)
		}
		cp.wall, raw.wall = cp.wall+ct, raw.wall+pt
		cr, pr := 2*float64(n)/(1<<20)/ct.Seconds(), 2*float64(n)/(1<<20)/pt.Seconds()
		cpRates, rawRates = append(cpRates, fmt.Sprintf("%.0f", cr)), append(rawRates, fmt.Sprintf("%.0f", pr))
		ratio.set(r, 0, cr/pr)
	}
	cp.Note = fmt.Sprintf("MiB/s by round %v (the copier's passes into a new metadata store and prefix)", cpRates)
	raw.Note = fmt.Sprintf("MiB/s by round %v", rawRates)
	return cp, raw, ratio, nil
}

// copyOnce tiers the partition's rolled segments with a new copier, store
// and prefix (named by run), and returns the time its passes took.
func (e *env) copyOnce(ctx context.Context, run int) (time.Duration, error) {
	dir := filepath.Join(e.dir, fmt.Sprintf("copy-r%d", run))
	defer os.RemoveAll(dir)
	store, err := rlmm.Open(rlmm.Config{Dir: dir})
	if err != nil {
		return 0, err
	}
	defer store.Close()
	mgr, err := rsm.NewManager(e.rec, rsm.Config{Prefix: fmt.Sprintf("%s/copy-r%d", e.prefix, run)})
	if err != nil {
		return 0, err
	}
	ccfg := copier.DefaultConfig()
	ccfg.LogDirs = []string{filepath.Dir(e.partDir)}
	ccfg.OwnershipLease = 0
	c, err := copier.New(ccfg, store, mgr, copier.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return 0, err
	}
	start := time.Now()
	for pass := 0; ; pass++ {
		if _, err := c.Sync(ctx); err != nil {
			return 0, fmt.Errorf("copy: %w", err)
		}
		fin, err := store.FinishedSegments(e.tp)
		if err != nil {
			return 0, err
		}
		if len(fin) >= len(e.fin) {
			return time.Since(start), nil
		}
		if pass == 20 {
			return 0, fmt.Errorf("copy: only %d of %d segments copied after 20 passes", len(fin), len(e.fin))
		}
	}
}

// rawPutOnce uploads the rolled segments' files under a prefix of the
// run's own and returns the time it took.
func (e *env) rawPutOnce(ctx context.Context, run int) (time.Duration, error) {
	start := time.Now()
	for _, m := range e.fin {
		for _, suffix := range []string{".log", ".index", ".timeindex"} {
			p := filepath.Join(e.partDir, fmt.Sprintf("%020d%s", m.StartOffset, suffix))
			f, err := os.Open(p)
			if err != nil {
				return 0, err
			}
			info, err := f.Stat()
			if err == nil {
				err = e.rec.Upload(ctx, fmt.Sprintf("%s/raw-put-r%d/%s", e.prefix, run, filepath.Base(p)), f, info.Size())
			}
			f.Close()
			if err != nil {
				return 0, fmt.Errorf("raw_put %s: %w", p, err)
			}
		}
	}
	return time.Since(start), nil
}
