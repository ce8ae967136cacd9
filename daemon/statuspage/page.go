// Package statuspage serves tierd's status page: one HTML page, rendered on
// the server with html/template from the copier's partition statuses, the
// metadata store's segment rows and deletion journal, the partitions'
// local segment files and the effective config. It has no JavaScript and
// loads nothing from elsewhere (its Content-Security-Policy forbids it);
// "?refresh=N" reloads it every N seconds with a meta refresh.
//
// Sections: a table of partitions (state and reason, local and remote
// ranges, lag, last copy), a timeline per partition of its segments
// (coloured by where their offsets are: local only, both tiers, remote
// only, pending delete; sized by offsets), the scheduled whole-partition
// deletions and the newest deletion journal entries, and the config as
// YAML with secrets redacted.
package statuspage

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/tierd/tierd/internal/remotelog"
)

// Config configures the page; tierd run uses DefaultConfig.
type Config struct {
	// JournalEntries is how many of the newest deletion journal entries
	// the page shows. Default 50.
	JournalEntries int `yaml:"journal_entries"`
	// TimelineSegments bounds the segments drawn per partition: the
	// newest ones, the older ones counted. Default 500.
	TimelineSegments int `yaml:"timeline_segments"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config { return Config{JournalEntries: 50, TimelineSegments: 500} }

// Validate reports every problem of the config.
func (c Config) Validate() error {
	var errs []error
	if c.JournalEntries < 0 {
		errs = append(errs, fmt.Errorf("statuspage: journal_entries %d must be 0 or more", c.JournalEntries))
	}
	if c.TimelineSegments < 1 {
		errs = append(errs, fmt.Errorf("statuspage: timeline_segments %d must be 1 or more", c.TimelineSegments))
	}
	return errors.Join(errs...)
}

// Tiering is the tiering status the page shows; *copier.Copier has it.
type Tiering interface {
	Status() remotelog.TieringStatus
}

// Metadata is what the page reads from the metadata store; *rlmm.Store
// has it.
type Metadata interface {
	// Segments returns every row of a partition, ordered by start offset.
	Segments(tp remotelog.TopicPartition) ([]remotelog.SegmentMetadata, error)
	// Deletions returns the scheduled partition deletions (tp nil: all).
	Deletions(tp *remotelog.TopicPartition) ([]remotelog.PartitionDeletion, error)
	// JournalTail returns the newest journal entries, newest first.
	JournalTail(limit int) ([]remotelog.JournalEntry, error)
}

// Fact is one line of the page's header, such as the instance id.
type Fact struct{ Name, Value string }

// Option sets an optional collaborator.
type Option func(*Page)

// WithLogger logs what goes wrong rendering the page (default: discard).
func WithLogger(l *slog.Logger) Option { return func(p *Page) { p.log = l } }

// WithClock replaces time.Now for the "ago" texts.
func WithClock(now func() time.Time) Option { return func(p *Page) { p.now = now } }

// WithEffectiveConfig shows the config get returns (a value with yaml
// tags, rendered by ConfigYAML; the running one, so a reload shows) and,
// when source is given, where each setting's value came from (see
// ConfigYAML). Without it the page has no config section.
func WithEffectiveConfig(get func() any, source func(key string) string) Option {
	return func(p *Page) { p.config, p.source = get, source }
}

// WithReadiness shows whether tierd is ready, and why not.
func WithReadiness(ready func() (bool, string)) Option { return func(p *Page) { p.ready = ready } }

// WithFacts shows facts about this tierd in the header.
func WithFacts(facts ...Fact) Option { return func(p *Page) { p.facts = append(p.facts, facts...) } }

// WithLiveFacts shows, after the fixed facts, those get returns at each
// view (who may reach what, which changes with a reload or an outage).
// get must not block and must return no secret.
func WithLiveFacts(get func() []Fact) Option { return func(p *Page) { p.live = get } }

// Page is the status page, an http.Handler for "/".
type Page struct {
	cfg    Config
	tier   Tiering
	meta   Metadata
	log    *slog.Logger
	now    func() time.Time
	config func() any
	source func(string) string
	ready  func() (bool, string)
	facts  []Fact
	live   func() []Fact

	brokerCopies func() (BrokerCopies, error) // nil: no RSM endpoint
}

//go:embed page.html.tmpl
var pageTemplate string

var tmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"bytes":  SizeText,
	"offset": offsetText,
}).Parse(pageTemplate))

// New returns the page over the copier's status and the metadata store.
// It returns the config's problems (Config.Validate).
func New(cfg Config, tier Tiering, meta Metadata, opts ...Option) (*Page, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if tier == nil || meta == nil {
		return nil, errors.New("statuspage: the tiering status and the metadata store are required")
	}
	p := &Page{cfg: cfg, tier: tier, meta: meta, log: slog.New(slog.DiscardHandler), now: time.Now}
	for _, o := range opts {
		o(p)
	}
	return p, nil
}

// ServeHTTP answers GET and HEAD of "/" with the page; other paths get
// 404, other methods 405.
//
// Behavior:
//   - Every request reads the status, rows, local segment lists and the
//     journal afresh; what cannot be read is named on the page, which is
//     still served (status 200).
//   - ?refresh=N (1-3600) adds a meta refresh of N seconds.
//   - The answer may not be cached and may load nothing from elsewhere
//     (Content-Security-Policy: default-src 'none'; inline styles only).
func (p *Page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	refresh := 0
	if v := r.URL.Query().Get("refresh"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= 1 && n <= 3600 {
			refresh = n
		}
	}
	var b bytes.Buffer
	if err := tmpl.Execute(&b, p.data(refresh)); err != nil {
		p.log.Error("status page not rendered", "err", err)
		http.Error(w, "status page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(b.Len()))
	if r.Method == http.MethodGet {
		w.Write(b.Bytes())
	}
}

// pageData is what the template renders.
type pageData struct {
	Now        string
	Refresh    int
	Refreshes  []int
	Ready      *readyView
	Facts      []Fact
	Summary    summary
	Skipped    []string
	Partitions []partRow
	Broker     *brokerView // nil: no RSM endpoint
	Timelines  []Timeline
	Legend     []legendItem
	Deletions  []deletionRow
	Journal    []journalRow
	JournalMax int
	HasConfig  bool
	Config     string
	Sources    bool
	Problems   []string
}

type readyView struct {
	OK  bool
	Why string
}

type legendItem struct {
	State SegState
	Text  string
}

// data gathers the page's contents; what cannot be read becomes a
// problem shown on the page.
func (p *Page) data(refresh int) pageData {
	now := p.now()
	d := pageData{Now: now.UTC().Format(time.RFC3339), Refresh: refresh, Refreshes: []int{5, 30}, Facts: p.facts, JournalMax: p.cfg.JournalEntries}
	if p.live != nil {
		d.Facts = append(slices.Clone(p.facts), p.live()...)
	}
	problem := func(what string, err error) {
		d.Problems = append(d.Problems, fmt.Sprintf("%s: %v", what, err))
		p.log.Debug("status page: part not shown", "what", what, "err", err)
	}
	if p.ready != nil {
		ok, why := p.ready()
		d.Ready = &readyView{OK: ok, Why: why}
	}
	st := p.tier.Status()
	d.Summary = summarize(st, now)
	d.Skipped = st.SkippedTopics
	for _, ps := range st.Partitions {
		d.Partitions = append(d.Partitions, partitionRow(ps, now))
		tp := remotelog.TopicPartition{Topic: ps.Topic, Partition: ps.Partition}
		local, err := listLocal(ps.Dir)
		if err != nil {
			problem(tp.String()+": local segments", err)
		}
		rows, err := p.meta.Segments(tp)
		if err != nil {
			problem(tp.String()+": metadata rows", err)
		}
		tl := buildTimeline(ps, local, rows, p.cfg.TimelineSegments)
		tl.Label = stateLabel(ps)
		d.Timelines = append(d.Timelines, tl)
	}
	if p.brokerCopies != nil {
		if b, err := p.brokerCopies(); err != nil {
			problem("broker-owned copies", err)
		} else {
			d.Broker = brokerSection(b, now)
		}
	}
	ds, err := p.meta.Deletions(nil)
	if err != nil {
		problem("scheduled deletions", err)
	}
	for _, del := range ds {
		d.Deletions = append(d.Deletions, deletionView(del, now))
		tl := deletionTimeline(del, p.cfg.TimelineSegments)
		tl.Label = fmt.Sprintf("scheduled deletion (%s), %s", del.State, dueText(del.DueMs, now))
		d.Timelines = append(d.Timelines, tl)
	}
	js, err := p.meta.JournalTail(p.cfg.JournalEntries)
	if err != nil {
		problem("deletion journal", err)
	}
	for _, e := range js {
		d.Journal = append(d.Journal, journalView(e))
	}
	for _, s := range segStates {
		d.Legend = append(d.Legend, legendItem{s.State, s.Text})
	}
	if p.config != nil {
		d.HasConfig, d.Sources = true, p.source != nil
		if d.Config, err = ConfigYAML(p.config(), p.source); err != nil {
			problem("config", err)
		}
	}
	return d
}
