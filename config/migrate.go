package config

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Keys renamed to Kafka's names (and units), and the MinIO endpoint's
// old host:port + insecure form. A file with an old spelling still loads
// for one release, with a warning naming the new one; migrate rewrites
// the parsed file to the new spelling before it is checked and decoded.
// Writing both spellings of one setting is an error.

// renamed is one key of a section that has a new name.
type renamed struct {
	section, old, new string
	// ms converts a duration ("10s") to milliseconds.
	ms bool
}

var renames = []renamed{
	{"copier", "interval", "remote.log.manager.task.interval.ms", true},
	{"copier", "file_delete_delay", "file.delete.delay.ms", true},
	{"copier", "copy_concurrency", "remote.log.manager.copier.thread.pool.size", false},
}

// hoisted are the keys of the old copier.retention section, now the
// broker-level defaults in copier itself.
var hoisted = map[string]string{
	"retention.ms": "log.retention.ms", "retention.bytes": "log.retention.bytes",
	"local.retention.ms": "log.local.retention.ms", "local.retention.bytes": "log.local.retention.bytes",
}

const untilNext = "the old spelling still loads, with this warning"

// migrate rewrites old spellings in a parsed tierd.yaml (a document node)
// to the current ones and returns a warning for each. renamed, when not
// nil, gets the old spelling of each key rewritten, by its full new key.
func migrate(doc *yaml.Node, renamed map[string]string) (warnings []string, errs []error) {
	if renamed == nil {
		renamed = map[string]string{}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, nil
	}
	root := doc.Content[0]
	if copier := child(root, "copier"); copier != nil && copier.Kind == yaml.MappingNode {
		for _, r := range renames {
			w, err := rename(copier, r, renamed)
			warnings, errs = appendIf(warnings, w), appendErr(errs, err)
		}
		w, e := hoistRetention(copier, renamed)
		warnings, errs = append(warnings, w...), append(errs, e...)
	}
	if bucket := child(root, "bucket"); bucket != nil && bucket.Kind == yaml.MappingNode {
		if m := child(bucket, "minio"); m != nil && m.Kind == yaml.MappingNode {
			w, err := minioEndpoint(m)
			warnings, errs = appendIf(warnings, w), appendErr(errs, err)
			if w != "" && !strings.Contains(w, "not needed") {
				renamed["bucket.minio.endpoint"] = "bucket.minio.endpoint host:port (+ insecure)"
			}
		}
	}
	return warnings, errs
}

func appendIf(ws []string, w string) []string {
	if w == "" {
		return ws
	}
	return append(ws, w)
}

func appendErr(errs []error, err error) []error {
	if err == nil {
		return errs
	}
	return append(errs, err)
}

// child returns the value node of key in a mapping node, or nil.
func child(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// remove deletes key from a mapping node.
func remove(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
	}
}

// rename renames one key of section node m.
func rename(m *yaml.Node, r renamed, done map[string]string) (string, error) {
	var k, v *yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == r.old {
			k, v = m.Content[i], m.Content[i+1]
		}
	}
	if k == nil {
		return "", nil
	}
	where := r.section + "." + r.old
	if child(m, r.new) != nil {
		remove(m, r.old) // reported here; not an unknown key as well
		return "", fmt.Errorf("line %d: %s: set %s or the old spelling %s, not both", k.Line, r.section, r.new, r.old)
	}
	val := v.Value
	if r.ms && v.Kind == yaml.ScalarNode && v.Tag != "!!null" {
		d, err := time.ParseDuration(v.Value)
		if v.Tag == "!!int" && v.Value == "0" {
			d, err = 0, nil
		}
		if err != nil {
			return "", fmt.Errorf("line %d: %s (now %s, in milliseconds): %q: want a duration like 10s", v.Line, where, r.new, v.Value)
		}
		val = strconv.FormatInt(d.Milliseconds(), 10)
		v.Tag, v.Value, v.Style = "!!int", val, 0
	}
	k.Value = r.new
	done[r.section+"."+r.new] = where
	return fmt.Sprintf("line %d: %s is now %s.%s (Kafka's name): write %s: %s; %s", k.Line, where, r.section, r.new, r.new, val, untilNext), nil
}

// hoistRetention moves the keys of copier.retention up into copier with
// Kafka's broker-level names.
func hoistRetention(copier *yaml.Node, done map[string]string) (warnings []string, errs []error) {
	var at int
	var sec *yaml.Node
	for i := 0; i+1 < len(copier.Content); i += 2 {
		if copier.Content[i].Value == "retention" {
			at, sec = i, copier.Content[i+1]
		}
	}
	if sec == nil || sec.Kind != yaml.MappingNode {
		return nil, nil // a non-section value is reported as an unknown key
	}
	line := copier.Content[at].Line
	var moved []*yaml.Node
	for i := 0; i+1 < len(sec.Content); i += 2 {
		k := sec.Content[i]
		nk, ok := hoisted[k.Value]
		if !ok {
			errs = append(errs, fmt.Errorf("line %d: copier.retention (now copier's log.* keys): unknown key %q%s", k.Line, k.Value,
				suggest(k.Value, "copier.retention", keysOf(hoisted))))
			continue
		}
		if child(copier, nk) != nil {
			errs = append(errs, fmt.Errorf("line %d: copier: set %s or the old spelling retention: %s, not both", k.Line, nk, k.Value))
			continue
		}
		warnings = append(warnings, fmt.Sprintf("line %d: copier.retention.%s is now copier.%s (Kafka's broker-level name): write %s: %s; %s",
			k.Line, k.Value, nk, nk, sec.Content[i+1].Value, untilNext))
		nkNode := *k
		nkNode.Value = nk
		done["copier."+nk] = "copier.retention." + k.Value
		moved = append(moved, &nkNode, sec.Content[i+1])
	}
	if len(errs) > 0 {
		return warnings, errs
	}
	copier.Content = append(copier.Content[:at], append(moved, copier.Content[at+2:]...)...)
	if len(sec.Content) == 0 {
		warnings = append(warnings, fmt.Sprintf("line %d: copier.retention is gone: its keys are copier's log.retention.ms, log.retention.bytes, "+
			"log.local.retention.ms and log.local.retention.bytes; %s", line, untilNext))
	}
	return warnings, nil
}

func keysOf(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// minioEndpoint turns bucket.minio's host:port endpoint and insecure flag
// into one URL, the syntax bucket.s3 uses too.
func minioEndpoint(m *yaml.Node) (string, error) {
	ep, ins := child(m, "endpoint"), child(m, "insecure")
	if ep == nil || ep.Kind != yaml.ScalarNode {
		if ins != nil {
			return "", fmt.Errorf("line %d: bucket.minio.insecure: give the endpoint as a URL instead (http:// or https://)", ins.Line)
		}
		return "", nil
	}
	insecure := false
	if ins != nil {
		b, err := strconv.ParseBool(ins.Value)
		if ins.Kind != yaml.ScalarNode || err != nil {
			return "", fmt.Errorf("line %d: bucket.minio.insecure: %q: want true or false", ins.Line, ins.Value)
		}
		insecure = b
		remove(m, "insecure")
	}
	if scheme, _, ok := strings.Cut(ep.Value, "://"); ok {
		if ins == nil {
			return "", nil
		}
		if (scheme == "http") != insecure {
			return "", fmt.Errorf("line %d: bucket.minio: insecure: %t contradicts endpoint %s; remove insecure: the URL's scheme says whether TLS is used",
				ins.Line, insecure, ep.Value)
		}
		return fmt.Sprintf("line %d: bucket.minio.insecure is not needed with a URL endpoint (its scheme says it): remove it; %s", ins.Line, untilNext), nil
	}
	if _, _, err := net.SplitHostPort(ep.Value); err != nil {
		return "", nil // Validate reports it
	}
	scheme := "https"
	if insecure {
		scheme = "http"
	}
	old := ep.Value
	ep.Value = scheme + "://" + old
	how := "endpoint host:port"
	if ins != nil {
		how += fmt.Sprintf(" with insecure: %t", insecure)
	}
	return fmt.Sprintf("line %d: bucket.minio.%s is the old form: write endpoint: %s (a URL, as bucket.s3 takes); %s", ep.Line, how, ep.Value, untilNext), nil
}
