package kafkaacl

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// kafkaACLsOutput is what "kafka-acls --list" prints (AclCommand's
// "Current ACLs for resource `%s`: %n %s %n", entries joined by a
// newline and a tab), with a comment added.
const kafkaACLsOutput = "# saved from the cluster\n" +
	"Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`: \n" +
	" \t(principal=User:billing, host=*, operation=READ, permissionType=ALLOW)\n" +
	"\t(principal=User:CN=ops,OU=sre, host=10.0.0.9, operation=ALL, permissionType=DENY) \n" +
	"\n" +
	"Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=billing, the old one, patternType=PREFIXED)`: \n" +
	" \t(principal=User:billing, host=0:0:0:0:0:0:0:1, operation=DESCRIBE_CONFIGS, permissionType=ALLOW) \n"

func TestParseKafkaACLsOutput(t *testing.T) {
	got, err := Parse(strings.NewReader(kafkaACLsOutput))
	if err != nil {
		t.Fatal(err)
	}
	want := []ACL{
		topicACL("orders", PatternLiteral, "User:billing", "*", OpRead, Allow),
		topicACL("orders", PatternLiteral, "User:CN=ops,OU=sre", "10.0.0.9", OpAll, Deny),
		{ResourceType: ResourceGroup, ResourceName: "billing, the old one", PatternType: PatternPrefixed,
			Principal: "User:billing", Host: "0:0:0:0:0:0:0:1", Operation: OpDescribeConfigs, Permission: Allow},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%v\nwant\n%v", got, want)
	}
	var buf bytes.Buffer
	if err := Format(&buf, got); err != nil {
		t.Fatal(err)
	}
	again, err := Parse(&buf)
	if err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	s1, _ := NewSet(got)
	s2, _ := NewSet(again)
	if !reflect.DeepEqual(s1.ACLs(), s2.ACLs()) {
		t.Fatalf("format and parse again:\n%v\n%v", s1.ACLs(), s2.ACLs())
	}
}

// TestParseNames: names in any case, with '-' or ' ' for '_', and the
// bare ResourcePattern line.
func TestParseNames(t *testing.T) {
	got, err := Parse(strings.NewReader("ResourcePattern(resourceType=transactional-id, name=tx, patternType=literal)\n" +
		"(principal=User:a, host=*, operation=describe configs, permissionType=allow)\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := ACL{ResourceType: ResourceTransactionalID, ResourceName: "tx", PatternType: PatternLiteral,
		Principal: "User:a", Host: "*", Operation: OpDescribeConfigs, Permission: Allow}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("%v", got)
	}
}

// TestParseErrors: every bad line is named by its number, and nothing of
// the file is returned.
func TestParseErrors(t *testing.T) {
	in := "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=a, patternType=LITERAL)`:\n" + // 1
		"\t(principal=User:a, host=*, operation=READ, permissionType=ALLOW)\n" + // 2 good
		"\t(principal=User:a, host=*, operation=REED, permissionType=ALLOW)\n" + // 3 bad operation
		"(principal=alice, host=*, operation=READ, permissionType=ALLOW)\n" + // 4 principal without type
		"Current ACLs for resource `ResourcePattern(resourceType=TOPIK, name=b, patternType=LITERAL)`:\n" + // 5 bad type
		"\t(principal=User:a, host=*, operation=READ, permissionType=ALLOW)\n" + // 6 after a bad pattern
		"grant alice read on orders\n" + // 7 not the form
		"Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=c, patternType=MATCH)`:\n" + // 8 filter value
		"\t(principal=User:a, host=*, operation=READ, permissionType=ALLOW)\n" + // 9 after a bad pattern
		"ResourcePattern(resourceType=TOPIC, name=d, patternType=LITERAL)\n" + // 10
		"\t(principal=User:a, host=*, operation=ANY, permissionType=ALLOW)\n" + // 11 filter value
		"\t(principal=User:a, host=broker-1, operation=READ, permissionType=ALLOW)\n" + // 12 a host name
		"\t(principal=User:a, host=::1, operation=READ, permissionType=ALLOW)\n" + // 13 not Kafka's text
		"\t(principal=User:a, host=0:0:0:0:0:0:0:1, operation=READ, permissionType=ALLOW)\n" // 14 good
	acls, err := Parse(strings.NewReader(in))
	if acls != nil {
		t.Fatalf("a bad file gave ACLs: %v", acls)
	}
	if err == nil {
		t.Fatal("no error")
	}
	for _, n := range []string{"line 3:", "line 4:", "line 5:", "line 6:", "line 7:", "line 9:", "line 11:", "line 12:", "line 13:"} {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("%s not named:\n%v", n, err)
		}
	}
	for _, n := range []string{"line 1:", "line 2:", "line 10:", "line 14:"} {
		if strings.Contains(err.Error(), n) {
			t.Errorf("%s named, but it is good:\n%v", n, err)
		}
	}
	if !errors.Is(err, ErrSyntax) || !errors.Is(err, ErrInvalid) {
		t.Errorf("want both ErrSyntax and ErrInvalid among %v", err)
	}
	if !strings.Contains(err.Error(), `"REED" is not an operation`) && !strings.Contains(err.Error(), `"REED"`) {
		t.Errorf("the bad operation is not quoted: %v", err)
	}
}

// FuzzParse: Parse never panics, and what it accepts formats and parses
// back to the same set.
func FuzzParse(f *testing.F) {
	f.Add(kafkaACLsOutput)
	f.Add("ResourcePattern(resourceType=TOPIC, name=, patternType=LITERAL)\n(principal=User:a, host=*, operation=READ, permissionType=ALLOW)")
	f.Add("Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=a`b, patternType=PREFIXED)`:\n(principal=User:a:b, host=, operation=ALL, permissionType=DENY)")
	f.Fuzz(func(t *testing.T, in string) {
		acls, err := Parse(strings.NewReader(in))
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := Format(&buf, acls); err != nil {
			t.Fatalf("accepted ACLs do not format: %v", err)
		}
		again, err := Parse(&buf)
		if err != nil {
			t.Fatalf("formatted ACLs do not parse: %v\n%s", err, buf.String())
		}
		s1, _ := NewSet(acls)
		s2, _ := NewSet(again)
		if !reflect.DeepEqual(s1.ACLs(), s2.ACLs()) {
			t.Fatalf("round trip changed the set:\n%v\n%v", s1.ACLs(), s2.ACLs())
		}
	})
}
