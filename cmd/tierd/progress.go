package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// progress shows how far a long command is: on a terminal a bar redrawn
// in place on one line, otherwise a plain line every plainEvery. It is
// safe for concurrent use.
type progress struct {
	w          io.Writer // stderr
	tty        bool
	what       string // "copies"
	total      int
	totalBytes int64
	start      time.Time
	now        func() time.Time

	mu        sync.Mutex
	done      int
	bytes     int64
	drawn     bool      // a bar is on the terminal's last line
	lastPlain time.Time // when the last plain line was written
}

// plainEvery is the interval of plain progress lines, barEvery the
// terminal bar's redraw interval.
const (
	plainEvery = 5 * time.Second
	barEvery   = 200 * time.Millisecond
)

// isTerminal reports whether w is a character device (a terminal), so a
// progress bar drawn with carriage returns shows as one line.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func newProgress(w io.Writer, tty bool, what string, total int, totalBytes int64) *progress {
	p := &progress{w: w, tty: tty, what: what, total: total, totalBytes: totalBytes, now: time.Now}
	p.start, p.lastPlain = p.now(), p.now()
	return p
}

// add counts read bytes.
func (p *progress) add(n int64) {
	p.mu.Lock()
	p.bytes += n
	p.mu.Unlock()
}

// finish counts one item done.
func (p *progress) finish() {
	p.mu.Lock()
	p.done++
	p.mu.Unlock()
}

// tick redraws the bar on a terminal, or writes a plain line when
// plainEvery has passed since the last.
func (p *progress) tick() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		p.drawLocked()
		return
	}
	if now := p.now(); now.Sub(p.lastPlain) >= plainEvery {
		p.lastPlain = now
		fmt.Fprintf(p.w, "%s\n", p.statusLocked())
	}
}

// println writes a line to w (which may be the terminal the bar is on):
// the bar is cleared first and drawn again after.
func (p *progress) println(w io.Writer, line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.drawn = false
	}
	fmt.Fprintln(w, line)
	if p.tty {
		p.drawLocked()
	}
}

// close ends the bar's line on a terminal.
func (p *progress) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		p.drawLocked()
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}

const barWidth = 30

func (p *progress) drawLocked() {
	frac := 1.0
	if p.totalBytes > 0 {
		frac = min(float64(p.bytes)/float64(p.totalBytes), 1)
	} else if p.total > 0 {
		frac = float64(p.done) / float64(p.total)
	}
	full := int(frac * barWidth)
	bar := strings.Repeat("#", full) + strings.Repeat("-", barWidth-full)
	fmt.Fprintf(p.w, "\r[%s] %s\x1b[K", bar, p.statusLocked())
	p.drawn = true
}

// statusLocked is "12/40 copies, 310.0 MiB of 1.2 GiB (25%), 85.3 MiB/s".
func (p *progress) statusLocked() string {
	pct := 100
	if p.totalBytes > 0 {
		pct = int(100 * p.bytes / p.totalBytes)
	}
	rate := ""
	if el := p.now().Sub(p.start).Seconds(); el > 0 {
		rate = fmt.Sprintf(", %s/s", humanBytes(int64(float64(p.bytes)/el)))
	}
	return fmt.Sprintf("%d/%d %s, %s of %s (%d%%)%s", p.done, p.total, p.what, humanBytes(p.bytes), humanBytes(p.totalBytes), pct, rate)
}

// humanBytes is n in B, KiB, MiB, GiB or TiB with one decimal.
func humanBytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, unit := float64(n)/1024, "KiB"
	for _, u := range []string{"MiB", "GiB", "TiB"} {
		if v < 1024 {
			break
		}
		v, unit = v/1024, u
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}
