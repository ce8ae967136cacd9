package listener

import (
	"reflect"
	"strings"
	"testing"
)

// TestParseListeners: Kafka's listeners, advertised.listeners and
// listener.security.protocol.map, as a table.
func TestParseListeners(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		listeners, adv, pmap string
		want                 []Endpoint
		err                  string // a part of the error; "" for none
	}{
		{name: "one plaintext", listeners: "PLAINTEXT://127.0.0.1:9192",
			want: []Endpoint{{Name: "PLAINTEXT", Protocol: Plaintext, Listen: "127.0.0.1:9192"}}},
		{name: "protocols as names, any case, empty host", listeners: "plaintext://127.0.0.1:9192, SASL_SSL://:9193",
			want: []Endpoint{{Name: "PLAINTEXT", Protocol: Plaintext, Listen: "127.0.0.1:9192"}, {Name: "SASL_SSL", Protocol: SASLSSL, Listen: ":9193"}}},
		{name: "named, mapped, advertised", listeners: "INTERNAL://127.0.0.1:9192,EXTERNAL://0.0.0.0:9193",
			adv: "EXTERNAL://tierd-1.example.com:9193", pmap: "internal:PLAINTEXT, EXTERNAL:sasl_ssl",
			want: []Endpoint{{Name: "INTERNAL", Protocol: Plaintext, Listen: "127.0.0.1:9192"},
				{Name: "EXTERNAL", Protocol: SASLSSL, Listen: "0.0.0.0:9193", Advertised: "tierd-1.example.com:9193"}}},
		{name: "the map overrides a protocol name", listeners: "SSL://127.0.0.1:9192", pmap: "SSL:SASL_SSL",
			want: []Endpoint{{Name: "SSL", Protocol: SASLSSL, Listen: "127.0.0.1:9192"}}},
		{name: "unmapped name", listeners: "EXTERNAL://:9193", err: "EXTERNAL is not a security protocol"},
		{name: "bad protocol in the map", listeners: "X://:1", pmap: "X:KERBEROS", err: "want NAME:PROTOCOL"},
		{name: "no scheme", listeners: "127.0.0.1:9192", err: "want NAME://host:port"},
		{name: "bad port", listeners: "PLAINTEXT://:99999", err: "port must be"},
		{name: "name twice", listeners: "PLAINTEXT://:1,plaintext://:2", err: "named twice"},
		{name: "port twice", listeners: "PLAINTEXT://127.0.0.1:9192,SSL://0.0.0.0:9192", err: "both listen on port 9192"},
		{name: "advertised unknown", listeners: "PLAINTEXT://:1", adv: "SSL://h:1", err: "not one of listeners"},
		{name: "advertised unspecified", listeners: "PLAINTEXT://:1", adv: "PLAINTEXT://0.0.0.0:1", err: "unspecified host"},
		{name: "advertised port 0", listeners: "PLAINTEXT://:1", adv: "PLAINTEXT://h:0", err: "port must be"},
		{name: "empty", listeners: " , ", err: "no listener"},
		{name: "every problem at once", listeners: "A://:1,PLAINTEXT://:x", err: "A is not a security protocol"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseListeners(tc.listeners, tc.adv, tc.pmap)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v %v, want %+v", got, err, tc.want)
			}
		})
	}
	if _, err := ParseListeners("A://:1,PLAINTEXT://:x", "", ""); err == nil || !strings.Contains(err.Error(), "port must be") {
		t.Errorf("not every problem reported: %v", err)
	}
}
