package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// copyCase compares the copier's tiering of the partition (timed in
// setup: its passes, from the first to the one that finished the last
// rolled segment) with raw_put: the same files (.log, .index, .timeindex
// of each rolled segment) uploaded one after another with the same
// bucket client (multipart above its part size), under the run's prefix.
// Both rates are over the same bytes, the .log files' sizes.
func (e *env) copyCase(ctx context.Context) (cp, raw *Result, err error) {
	cp, raw = newResult("copy"), newResult("raw_put")
	cp.bytes, cp.wall = e.tieredBytes(), e.copyWall
	cp.add(e.copyWall, 0)
	start := time.Now()
	for _, m := range e.fin {
		t := time.Now()
		for _, suffix := range []string{".log", ".index", ".timeindex"} {
			p := filepath.Join(e.partDir, fmt.Sprintf("%020d%s", m.StartOffset, suffix))
			f, err := os.Open(p)
			if err != nil {
				return nil, nil, err
			}
			info, err := f.Stat()
			if err == nil {
				err = e.rec.Upload(ctx, fmt.Sprintf("%s/raw-put/%s", e.prefix, filepath.Base(p)), f, info.Size())
			}
			f.Close()
			if err != nil {
				return nil, nil, fmt.Errorf("raw_put %s: %w", p, err)
			}
		}
		raw.add(time.Since(t), m.SizeInBytes)
	}
	raw.wall = time.Since(start)
	return cp, raw, nil
}
