package config

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// This file knows tierd.yaml's keys from the config structs' yaml tags:
// it checks a file's keys and values before they are decoded, so that an
// unknown key gets a "did you mean" and a bad value is described in
// durations, milliseconds and bytes rather than Go types. flatten.go lists
// every setting with its value.

var durationType = reflect.TypeFor[time.Duration]()

// field is one yaml key of a struct, inline fields' keys included.
type field struct {
	key   string
	index []int
	typ   reflect.Type
}

// fields lists the yaml keys of struct type t, in declaration order.
func fields(t reflect.Type) []field {
	var out []field
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if opts == "inline" {
			for _, sub := range fields(f.Type) {
				sub.index = append([]int{i}, sub.index...)
				out = append(out, sub)
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out = append(out, field{key: name, index: []int{i}, typ: f.Type})
	}
	return out
}

// valueKind says in words what a setting of type t (named key) takes.
func valueKind(key string, t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == durationType:
		return "a duration like 10s or 5m"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() == reflect.String:
		return "a single value"
	case t.Kind() == reflect.Slice:
		return "a list such as [a, b]"
	case t.Kind() == reflect.Struct, t.Kind() == reflect.Map:
		return "a section of key: value lines"
	case strings.HasSuffix(key, ".per.second"):
		return "bytes per second, a whole number such as 10485760"
	case strings.HasSuffix(key, ".ms"):
		return "milliseconds, a whole number such as 60000"
	case strings.HasSuffix(key, "bytes") || strings.HasSuffix(key, "_size"):
		return "bytes, a whole number such as 1048576"
	}
	return "a whole number"
}

// checkKeys checks a mapping node against struct type t: every key known,
// every value of its setting's kind. path is the section ("copier").
// Durations written as 0 become 0s. All problems are returned at once.
func checkKeys(n *yaml.Node, t reflect.Type, path string) []error {
	if n.Kind != yaml.MappingNode {
		return []error{fmt.Errorf("line %d: %s: want a section of key: value lines", n.Line, orTop(path))}
	}
	known := map[string]field{}
	var names []string
	for _, f := range fields(t) {
		known[f.key] = f
		names = append(names, f.key)
	}
	errs := twice(n, path)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		f, ok := known[k.Value]
		if !ok {
			hint := suggest(k.Value, path, names)
			if v.Kind == yaml.MappingNode {
				hint = nestedHint(k.Value, names, hint)
			}
			errs = append(errs, fmt.Errorf("line %d: %s: unknown key %q%s", k.Line, orTop(path), k.Value, hint))
			continue
		}
		errs = append(errs, checkValue(v, f.typ, join(path, f.key))...)
	}
	return errs
}

// twice reports each key of mapping n (section path) that an earlier key
// of n already set, with both lines.
func twice(n *yaml.Node, path string) []error {
	var errs []error
	first := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if l, ok := first[k.Value]; ok {
			errs = append(errs, fmt.Errorf("line %d: %s: %q is set twice (first at line %d)", k.Line, orTop(path), k.Value, l))
			continue
		}
		first[k.Value] = k.Line
	}
	return errs
}

// checkValue checks one value node against the setting's type.
func checkValue(v *yaml.Node, t reflect.Type, key string) []error {
	if v.Kind == yaml.AliasNode {
		v = v.Alias
	}
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return nil // keeps the default
	}
	bad := func() []error {
		return []error{fmt.Errorf("line %d: %s: %s: want %s%s", v.Line, key, shownFor(key, v), valueKind(key, t), hint(key, t, v))}
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t.Kind() == reflect.Struct && t != durationType:
		return checkKeys(v, t, key)
	case t.Kind() == reflect.Map:
		if v.Kind != yaml.MappingNode {
			return bad()
		}
		errs := twice(v, key)
		for i := 0; i+1 < len(v.Content); i += 2 {
			errs = append(errs, checkValue(v.Content[i+1], t.Elem(), join(key, v.Content[i].Value))...)
		}
		return errs
	case t.Kind() == reflect.Slice:
		if v.Kind != yaml.SequenceNode {
			return bad()
		}
		return nil
	case v.Kind != yaml.ScalarNode:
		return bad()
	case t == durationType:
		if v.Tag == "!!int" && v.Value == "0" {
			v.Tag, v.Value = "!!str", "0s"
			return nil
		}
		if _, err := time.ParseDuration(v.Value); v.Tag != "!!str" || err != nil {
			return bad()
		}
	case t.Kind() == reflect.Bool:
		if v.Tag != "!!bool" {
			return bad()
		}
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		if v.Tag != "!!int" && !integral(v) {
			return bad()
		}
		return inRange(v, t, key)
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		if v.Tag != "!!int" && !integral(v) || strings.HasPrefix(v.Value, "-") {
			return bad()
		}
		return inRange(v, t, key)
	}
	return nil
}

// integral reports whether a scalar is written as a whole number, such as
// 99999999999999999999, which YAML types as a float when int64 cannot
// hold it.
func integral(v *yaml.Node) bool {
	s := strings.TrimLeft(v.Value, "+-")
	return s != "" && strings.Trim(s, "0123456789_") == ""
}

// inRange checks that a whole number fits the setting's type, and says its
// range in the setting's units where it does not (Kafka's int settings
// stop at 2147483647, its long ones at 9223372036854775807).
func inRange(v *yaml.Node, t reflect.Type, key string) []error {
	// A whole number YAML types as a float is past int64 (and yaml.v3
	// would decode it as the nearest limit); an int is decoded to check.
	if v.Tag == "!!int" && v.Decode(reflect.New(t).Interface()) == nil {
		return nil
	}
	unit := ""
	switch kind := valueKind(key, t); {
	case strings.HasPrefix(kind, "bytes per second"):
		unit = " bytes per second"
	case strings.HasPrefix(kind, "milliseconds"):
		unit = " ms"
	case strings.HasPrefix(kind, "bytes"):
		unit = " bytes"
	}
	var lo, hi string
	if t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64 {
		lo, hi = "0", strconv.FormatUint(math.MaxUint64>>(64-t.Bits()), 10)
	} else {
		lo, hi = strconv.FormatInt(math.MinInt64>>(64-t.Bits()), 10), strconv.FormatInt(math.MaxInt64>>(64-t.Bits()), 10)
	}
	bound := "at most " + hi
	if strings.HasPrefix(v.Value, "-") {
		bound = "at least " + lo
	}
	return []error{fmt.Errorf("line %d: %s: %s is out of range (%s%s)", v.Line, key, strings.Trim(shownFor(key, v), `"`), bound, unit)}
}

// shown quotes a value node for a message.
func shown(v *yaml.Node) string {
	switch v.Kind {
	case yaml.MappingNode:
		return "a section"
	case yaml.SequenceNode:
		return "a list"
	}
	return strconv.Quote(v.Value)
}

// shownFor is shown(v), but for a secret's value (see Secret): that is
// never written, the message names the key and the problem only.
func shownFor(key string, v *yaml.Node) string {
	if Secret(key) && v.Kind == yaml.ScalarNode {
		return "the value (not shown)"
	}
	return shown(v)
}

// hint converts a value written in other units, when it can: "10s" for
// milliseconds, "16MiB" for bytes, "10000" for a duration; none for a
// secret.
func hint(key string, t reflect.Type, v *yaml.Node) string {
	if v.Kind != yaml.ScalarNode || Secret(key) {
		return ""
	}
	kind := valueKind(key, t)
	switch {
	case strings.HasPrefix(kind, "milliseconds"):
		if d, err := time.ParseDuration(v.Value); err == nil {
			return fmt.Sprintf(" (%s is %d)", v.Value, d.Milliseconds())
		}
	case strings.HasPrefix(kind, "bytes"):
		if n, ok := parseSize(v.Value); ok {
			return fmt.Sprintf(" (%s is %d)", v.Value, n)
		}
	case t == durationType && v.Tag == "!!int":
		return fmt.Sprintf(" (a number needs a unit: %ss, %sms?)", v.Value, v.Value)
	case strings.HasPrefix(kind, "a whole number") && strings.HasPrefix(v.Value, "-"):
		return ", 0 or more"
	}
	return ""
}

// parseSize reads sizes such as 16MiB, 10MB or 4k, for a hint.
func parseSize(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   int64
	}{{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40}, {"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
		{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"b", 1}}
	low := strings.ToLower(s)
	for _, u := range units {
		if num, ok := strings.CutSuffix(low, u.suffix); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
			if err != nil || n < 0 {
				return 0, false
			}
			return n * u.mult, true
		}
	}
	return 0, false
}

// nestedHint is the hint for an unknown key written as a section whose
// name begins dotted keys of this section (compression: {enabled: true}
// for compression.enabled), else otherwise.
func nestedHint(key string, names []string, otherwise string) string {
	var dotted []string
	for _, n := range names {
		if strings.HasPrefix(n, key+".") {
			dotted = append(dotted, n)
		}
	}
	if len(dotted) == 0 {
		return otherwise
	}
	return fmt.Sprintf("; the section's keys are dotted names, written whole, not nested: %s", strings.Join(dotted, ", "))
}

// suggest returns ` (did you mean "x"?)` for an unknown key: the nearest
// key of the same section by edit distance, else the same key in another
// section, else nothing.
func suggest(key, path string, names []string) string {
	best, bestD := "", max(2, len(key)/3)+1
	for _, n := range names {
		if d := editDistance(strings.ToLower(key), strings.ToLower(n)); d < bestD {
			best, bestD = n, d
		}
	}
	for _, r := range renames { // an old spelling, misspelt
		if r.section == path {
			if d := editDistance(strings.ToLower(key), r.old); d < bestD {
				best, bestD = fmt.Sprintf("%s (formerly %s)", r.new, r.old), d
			}
		}
	}
	if best != "" {
		if strings.Contains(best, " (formerly ") {
			return fmt.Sprintf("; did you mean %s?", best)
		}
		return fmt.Sprintf("; did you mean %q?", best)
	}
	for _, p := range allKeys() {
		if strings.HasSuffix(p, "."+key) && !strings.HasPrefix(p, path+".") {
			return fmt.Sprintf("; did you mean %q (in section %s)?", key, strings.TrimSuffix(p, "."+key))
		}
	}
	return ""
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// allKeys lists every setting's full key ("copier.log_dirs"); a map's
// entries appear as "copier.topics.*.retention.ms".
func allKeys() []string {
	var out []string
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for _, f := range fields(t) {
			ft := f.typ
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch {
			case ft.Kind() == reflect.Struct && ft != durationType:
				walk(ft, join(path, f.key))
			case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
				walk(ft.Elem(), join(path, f.key+".*"))
			default:
				out = append(out, join(path, f.key))
			}
		}
	}
	walk(reflect.TypeFor[Config](), "")
	return out
}
