package config

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Setting is one leaf setting of a config and its value.
type Setting struct {
	// Key is the full key, "copier.log_dirs"; a map's entries are named
	// by their map key, "copier.topics.orders.retention.ms".
	Key string
	// Value is the value as it would be written in tierd.yaml (strings
	// quoted, durations as 10s, lists as [a, b]); "-" for an unset
	// optional (a per-topic key that inherits); "(set, not shown)" for a
	// secret that is set (see Secret).
	Value string
	// cmp, compared to tell a change, is the value itself, a secret's too.
	cmp string
}

// Secret reports whether a key's value must never be printed or logged:
// a password.
func Secret(key string) bool { return strings.HasSuffix(key, "password") }

// Flatten lists every setting of cfg with its value, in the order of the
// structs (map entries sorted by their key).
func Flatten(cfg Config) []Setting {
	var out []Setting
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		for _, f := range fields(v.Type()) {
			fv, key := v.FieldByIndex(f.index), join(path, f.key)
			if fv.Kind() == reflect.Pointer && !fv.IsNil() && fv.Elem().Kind() == reflect.Struct {
				fv = fv.Elem()
			}
			switch {
			case fv.Kind() == reflect.Struct && fv.Type() != durationType:
				walk(fv, key)
			case fv.Kind() == reflect.Map && fv.Type().Elem().Kind() == reflect.Struct:
				keys := fv.MapKeys()
				sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
				for _, k := range keys {
					walk(fv.MapIndex(k), join(key, k.String()))
				}
			default:
				v := text(fv)
				shown := v
				if Secret(key) && v != `""` {
					shown = "(set, not shown)"
				}
				out = append(out, Setting{key, shown, v})
			}
		}
	}
	walk(reflect.ValueOf(cfg), "")
	return out
}

// text renders a value as it would be written in tierd.yaml; an unset
// pointer is "-" (inherited).
func text(v reflect.Value) string {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "-"
		}
		v = v.Elem()
	}
	switch {
	case v.Type() == durationType:
		return time.Duration(v.Int()).String()
	case v.Kind() == reflect.Slice:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = fmt.Sprint(v.Index(i).Interface())
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case v.Kind() == reflect.String:
		return strconv.Quote(v.String())
	}
	return fmt.Sprint(v.Interface())
}

// fileKeys lists the settings a mapping node sets, by full key.
func fileKeys(n *yaml.Node, path string, out map[string]bool) {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if n.Kind != yaml.MappingNode {
		if path != "" && !(n.Kind == yaml.ScalarNode && n.Tag == "!!null") {
			out[path] = true
		}
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		fileKeys(n.Content[i+1], join(path, n.Content[i].Value), out)
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orTop(path string) string {
	if path == "" {
		return "top level"
	}
	return path
}
