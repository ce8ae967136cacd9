package statuspage

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Redacted replaces the value of every secret setting that is set.
const Redacted = "(set, not shown)"

// Secret reports whether a setting's value must never be shown: its key
// (the last name of its path) names a password, a secret, a token, a
// credential or an access or private key. A setting naming a file that
// holds one (password_file, key_file) is a path and is shown.
func Secret(key string) bool {
	k := strings.ToLower(key)
	if strings.HasSuffix(k, "_file") || strings.HasSuffix(k, "_path") || strings.HasSuffix(k, "_env") {
		return false
	}
	for _, s := range []string{"password", "secret", "token", "credential", "access_key", "private_key", "passphrase"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// ConfigYAML renders cfg (any value with yaml tags) as YAML, with every
// secret setting's value replaced by Redacted. source, when given, names
// where each setting's value came from, by its dotted key path
// ("copier.retention.retention.ms", the path of yaml keys joined by dots):
// the text becomes a line comment ("# file"), none when it returns "".
func ConfigYAML(cfg any, source func(key string) string) (string, error) {
	var root yaml.Node
	if err := root.Encode(cfg); err != nil {
		return "", fmt.Errorf("statuspage: encode config: %w", err)
	}
	annotate(&root, "", source)
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&root); err != nil {
		return "", fmt.Errorf("statuspage: encode config: %w", err)
	}
	if err := enc.Close(); err != nil {
		return "", fmt.Errorf("statuspage: encode config: %w", err)
	}
	return b.String(), nil
}

// annotate redacts secrets under n, writes lists of plain values on one
// line, and adds each leaf's source as a line comment.
func annotate(n *yaml.Node, path string, source func(string) string) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			annotate(c, path, source)
		}
	case yaml.SequenceNode:
		flow := true
		for _, c := range n.Content {
			flow = flow && c.Kind == yaml.ScalarNode
		}
		if flow {
			n.Style = yaml.FlowStyle
		}
		for _, c := range n.Content {
			annotate(c, path, nil)
		}
	case yaml.MappingNode:
		// An unset optional setting (null) inherits its value from a
		// higher level: it is left out.
		kept := n.Content[:0]
		for i := 0; i+1 < len(n.Content); i += 2 {
			if v := n.Content[i+1]; v.Kind != yaml.ScalarNode || v.Tag != "!!null" {
				kept = append(kept, n.Content[i], v)
			}
		}
		n.Content = kept
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			key := k.Value
			if path != "" {
				key = path + "." + k.Value
			}
			if Secret(k.Value) && v.Kind != yaml.MappingNode { // a secret is a value, not a section (or a topic named "tokens")
				redact(v)
			}
			annotate(v, key, source)
			if source != nil && v.Kind != yaml.MappingNode {
				if s := source(key); s != "" {
					v.LineComment = s
				}
			}
		}
	}
}

// redact replaces every non-empty scalar under n.
func redact(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode {
		if n.Value != "" && n.Tag != "!!null" {
			n.Value, n.Tag, n.Style = Redacted, "!!str", 0
		}
		return
	}
	for _, c := range n.Content {
		redact(c)
	}
}
