package copier

import (
	"reflect"
	"strings"
	"testing"

	"github.com/tierd/tierd/rlmm"
)

// TestNoBrokerCopiesInMetadataStore: the copier reaches the metadata
// store only through MetadataStore, which holds none of the store's
// methods of the broker-copy catalogue (rlmm's 'b' family): no copier
// path can read, move or delete a broker-owned copy's row.
func TestNoBrokerCopiesInMetadataStore(t *testing.T) {
	store := reflect.TypeOf((*rlmm.Store)(nil))
	n := 0
	for i := range store.NumMethod() {
		if strings.Contains(store.Method(i).Name, "Broker") {
			n++
		}
	}
	if n < 8 {
		t.Fatalf("rlmm.Store has %d broker-copy methods, want the catalogue's 8", n)
	}
	iface := reflect.TypeOf((*MetadataStore)(nil)).Elem()
	for i := range iface.NumMethod() {
		if name := iface.Method(i).Name; strings.Contains(name, "Broker") {
			t.Errorf("MetadataStore has %s, a method of the broker-copy catalogue", name)
		}
	}
}
