package kafkaacl

import (
	"fmt"
	"regexp"
	"strings"
)

// principalRule is one rule of ssl.principal.mapping.rules (Kafka's
// SslPrincipalMapper): DEFAULT (the distinguished name itself), or
// RULE:pattern/replacement/ with an optional L or U (lower or upper
// case the result). A rule applies when its pattern matches the whole
// distinguished name; the result is the name with every match of the
// pattern replaced ($1, $2 ... the pattern's groups).
type principalRule struct {
	isDefault   bool
	pattern     *regexp.Regexp // as written
	whole       *regexp.Regexp // ^(?:pattern)$
	replacement string
	lower       bool
	upper       bool
}

// PrincipalRules is the parsed rule list, applied in order; the first
// rule that applies gives the principal's name.
type PrincipalRules []principalRule

// ParsePrincipalRules parses ssl.principal.mapping.rules in Kafka's
// syntax: rules separated by commas, each "DEFAULT" or
// "RULE:pattern/replacement/[LU]" ('/' and '\' escaped with '\' inside
// pattern and replacement). An empty string is "DEFAULT". Patterns are
// Go regular expressions (RE2: Java's back-references and look-arounds
// are refused with the rule named).
func ParsePrincipalRules(s string) (PrincipalRules, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		s = "DEFAULT"
	}
	var out PrincipalRules
	for len(s) > 0 {
		s = strings.TrimLeft(s, " \t")
		switch {
		case strings.HasPrefix(s, "DEFAULT"):
			out = append(out, principalRule{isDefault: true})
			s = s[len("DEFAULT"):]
		case strings.HasPrefix(s, "RULE:"):
			rest := s[len("RULE:"):]
			pat, rest, ok1 := cutUnescaped(rest)
			rep, rest, ok2 := cutUnescaped(rest)
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("listener: ssl.principal.mapping.rules: %q: want RULE:pattern/replacement/[LU]", s)
			}
			r := principalRule{replacement: rep}
			if strings.HasPrefix(rest, "L") {
				r.lower, rest = true, rest[1:]
			} else if strings.HasPrefix(rest, "U") {
				r.upper, rest = true, rest[1:]
			}
			var err error
			if r.pattern, err = regexp.Compile(pat); err == nil {
				r.whole, err = regexp.Compile("^(?:" + pat + ")$")
			}
			if err != nil {
				return nil, fmt.Errorf("listener: ssl.principal.mapping.rules: pattern %q: %w", pat, err)
			}
			out = append(out, r)
			s = rest
		default:
			return nil, fmt.Errorf("listener: ssl.principal.mapping.rules: %q: want DEFAULT or RULE:pattern/replacement/[LU]", s)
		}
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			break
		}
		if s[0] != ',' {
			return nil, fmt.Errorf("listener: ssl.principal.mapping.rules: %q after a rule: want a comma", s)
		}
		s = s[1:]
	}
	return out, nil
}

// cutUnescaped returns s up to its first '/' not escaped by '\' (the
// escapes removed for "\/", kept for the rest, as Java's pattern sees
// them), and what follows the '/'.
func cutUnescaped(s string) (before, after string, ok bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == '/':
			b.WriteByte('/')
			i++
		case s[i] == '\\' && i+1 < len(s):
			b.WriteString(s[i : i+2])
			i++
		case s[i] == '/':
			return b.String(), s[i+1:], true
		default:
			b.WriteByte(s[i])
		}
	}
	return "", "", false
}

// Name maps a distinguished name to a principal's name; ok is false when
// no rule applies (Kafka then fails the client's authentication).
func (m PrincipalRules) Name(dn string) (string, bool) {
	for _, r := range m {
		if r.isDefault {
			return dn, true
		}
		if !r.whole.MatchString(dn) {
			continue
		}
		out := r.pattern.ReplaceAllString(dn, r.replacement)
		switch {
		case r.lower:
			out = strings.ToLower(out)
		case r.upper:
			out = strings.ToUpper(out)
		}
		return out, true
	}
	return "", false
}
