package kafkaacl

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
)

// ErrSyntax marks a line of an ACL file that is not in its form (see
// doc.go).
var ErrSyntax = errors.New("kafkaacl: ACL file syntax")

// Parse reads an ACL file (doc.go: the form "kafka-acls --list"
// prints) and returns its ACLs in file order. Errors: every bad line, by
// line number (errors.Is ErrSyntax or ErrInvalid), and r's read error;
// no ACL is returned then, so a file with a mistake never takes effect
// in part.
func Parse(r io.Reader) ([]ACL, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var (
		out     []ACL
		errs    []error
		pattern *ACL // the resource pattern of the lines that follow
		line    int
	)
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		switch {
		case s == "" || strings.HasPrefix(s, "#"):
		case strings.HasPrefix(s, "Current ACLs for resource `") || strings.HasPrefix(s, "ResourcePattern("):
			p, err := parsePatternLine(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("line %d: %w", line, err))
				pattern = nil
				continue
			}
			pattern = &p
		case strings.HasPrefix(s, "(principal="):
			if pattern == nil {
				errs = append(errs, fmt.Errorf("line %d: %w: an entry with no resource pattern before it (or after a bad one)", line, ErrSyntax))
				continue
			}
			a, err := parseEntry(s, *pattern)
			if err == nil {
				err = a.Validate()
			}
			if err == nil {
				err = checkFileHost(a.Host)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("line %d: %w", line, err))
				continue
			}
			out = append(out, a)
		default:
			errs = append(errs, fmt.Errorf("line %d: %w: want a resource pattern line, an entry \"(principal=...)\", a comment or a blank line", line, ErrSyntax))
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("line %d: %w", line+1, err))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// parsePatternLine reads "Current ACLs for resource `ResourcePattern(
// resourceType=T, name=N, patternType=P)`:" or the bare ResourcePattern.
// The name is everything between ", name=" and the last ", patternType=",
// so a group name holding ", " reads back whole.
func parsePatternLine(s string) (ACL, error) {
	if rest, ok := strings.CutPrefix(s, "Current ACLs for resource `"); ok {
		end := strings.LastIndex(rest, "`")
		if end < 0 {
			return ACL{}, fmt.Errorf("%w: no closing ` after the resource pattern", ErrSyntax)
		}
		if tail := strings.TrimSpace(rest[end+1:]); tail != ":" && tail != "" {
			return ACL{}, fmt.Errorf("%w: %q after the resource pattern", ErrSyntax, tail)
		}
		s = rest[:end]
	}
	body, ok := strings.CutPrefix(s, "ResourcePattern(resourceType=")
	if !ok || !strings.HasSuffix(body, ")") {
		return ACL{}, fmt.Errorf("%w: want ResourcePattern(resourceType=..., name=..., patternType=...)", ErrSyntax)
	}
	body = body[:len(body)-1]
	typ, rest, ok := strings.Cut(body, ", name=")
	p := strings.LastIndex(rest, ", patternType=")
	if !ok || p < 0 {
		return ACL{}, fmt.Errorf("%w: want ResourcePattern(resourceType=..., name=..., patternType=...)", ErrSyntax)
	}
	var a ACL
	var err1, err2 error
	a.ResourceType, err1 = ParseResourceType(typ)
	a.ResourceName = rest[:p]
	a.PatternType, err2 = ParsePatternType(rest[p+len(", patternType="):])
	return a, errors.Join(err1, err2)
}

// parseEntry reads "(principal=P, host=H, operation=O,
// permissionType=T)". The principal is everything before the last
// ", host=", so an mTLS principal such as "User:CN=a,OU=b" reads back
// whole.
func parseEntry(s string, pattern ACL) (ACL, error) {
	body, ok := strings.CutPrefix(s, "(principal=")
	if !ok || !strings.HasSuffix(body, ")") {
		return ACL{}, fmt.Errorf("%w: want (principal=..., host=..., operation=..., permissionType=...)", ErrSyntax)
	}
	body = body[:len(body)-1]
	iPerm := strings.LastIndex(body, ", permissionType=")
	iOp := strings.LastIndex(body[:max(iPerm, 0)], ", operation=")
	iHost := strings.LastIndex(body[:max(iOp, 0)], ", host=")
	if iPerm < 0 || iOp < 0 || iHost < 0 {
		return ACL{}, fmt.Errorf("%w: want (principal=..., host=..., operation=..., permissionType=...)", ErrSyntax)
	}
	a := pattern
	a.Principal = body[:iHost]
	a.Host = body[iHost+len(", host=") : iOp]
	var err1, err2 error
	a.Operation, err1 = ParseOperation(body[iOp+len(", operation=") : iPerm])
	a.Permission, err2 = ParsePermission(body[iPerm+len(", permissionType="):])
	return a, errors.Join(err1, err2)
}

// checkFileHost refuses, in a file, a host that is neither "*" nor an
// IP address as HostString prints it: in Kafka's rules it would match no
// client, which in an operator's file is a mistake to name, not a rule
// to keep.
func checkFileHost(h string) error {
	if h == WildcardHost {
		return nil
	}
	a, err := netip.ParseAddr(h)
	if err != nil {
		return fmt.Errorf("%w: host %q is neither * nor an IP address (a host name matches no client)", ErrInvalid, h)
	}
	if HostString(a) != h {
		return fmt.Errorf("%w: host %q matches no client: Kafka compares the text %q", ErrInvalid, h, HostString(a))
	}
	return nil
}

// Format writes acls in the file's form, grouped by resource pattern in
// the order Set sorts them: what Parse reads back. Errors: an invalid
// ACL, or a name, principal or host holding a line break (the form is
// one line per entry).
func Format(w io.Writer, acls []ACL) error {
	s, err := NewSet(acls)
	if err != nil {
		return err
	}
	for _, a := range s.acls {
		if strings.ContainsAny(a.ResourceName+a.Principal+a.Host, "\r\n") {
			return fmt.Errorf("kafkaacl: %v: a line break cannot be written in the file's form", a)
		}
	}
	bw := bufio.NewWriter(w)
	last := ""
	for _, a := range s.acls {
		if p := a.patternString(); p != last {
			if last != "" {
				bw.WriteString("\n")
			}
			fmt.Fprintf(bw, "Current ACLs for resource `%s`:\n", p)
			last = p
		}
		fmt.Fprintf(bw, "\t%s\n", a.entryString())
	}
	return bw.Flush()
}
