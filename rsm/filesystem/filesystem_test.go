package filesystem

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestListingsUnderPrefix: the temporary files of interrupted uploads (as
// a crash leaves them) are listed by IncompleteUploads under every prefix
// that covers them, a copy's stem, its partition or the bucket's root,
// and by no other, never by Iter, and AbortIncompleteUploads of a stem
// removes only that stem's; prefixes that would climb out of the bucket's
// directory list nothing even where the parent holds files.
func TestListingsUnderPrefix(t *testing.T) {
	ctx := context.Background()
	parent := t.TempDir()
	dir := filepath.Join(parent, "bucket")
	b, err := New(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(parent, "outside"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"t-1/00-a.log", "t-1/00-b.log", "t-10/00-a.log"} {
		if err := b.Upload(ctx, k, bytes.NewReader([]byte(k)), int64(len(k))); err != nil {
			t.Fatal(err)
		}
	}
	crashed := []string{"t-1/00-a.log.123" + tmpSuffix, "t-1/00-b.index.456" + tmpSuffix, "t-10/00-a.log.789" + tmpSuffix}
	for _, name := range crashed {
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(name)), []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ prefix, want string }{
		{"", fmt.Sprint(crashed)},
		{"t-1/", fmt.Sprint(crashed[:2])},
		{"t-1", fmt.Sprint(crashed)},
		{"t-1/00-a", fmt.Sprint(crashed[:1])},
		{"t-1/00-b.", fmt.Sprint(crashed[1:2])},
		{"t-2/", "[]"},
		{"t-1/00-a.log/", "[]"},
		{"../", "[]"},
		{"t-1/../../", "[]"},
		{"/", "[]"},
	} {
		ups, err := b.IncompleteUploads(ctx, tc.prefix)
		if err != nil || fmt.Sprint(ups) != tc.want {
			t.Errorf("IncompleteUploads(%q) = %v, %v; want %s", tc.prefix, ups, err, tc.want)
		}
	}
	for _, tc := range []struct{ prefix, want string }{
		{"", "[t-1/00-a.log t-1/00-b.log t-10/00-a.log]"},
		{"t-1/00-a", "[t-1/00-a.log]"},
		{"../", "[]"},
		{"..", "[]"}, // "../outside" is outside; ".." as a partial name matches no entry of the root
		{"t-1/../", "[]"},
		{"/", "[]"},
	} {
		var keys []string
		if err := b.Iter(ctx, tc.prefix, func(k string) error { keys = append(keys, k); return nil }); err != nil || fmt.Sprint(keys) != tc.want {
			t.Errorf("Iter(%q) = %v, %v; want %s", tc.prefix, keys, err, tc.want)
		}
	}
	if err := b.AbortIncompleteUploads(ctx, "t-1/00-a."); err != nil {
		t.Fatal(err)
	}
	if ups, err := b.IncompleteUploads(ctx, ""); err != nil || fmt.Sprint(ups) != fmt.Sprint(crashed[1:]) {
		t.Errorf("after aborting t-1/00-a.'s uploads: %v, %v; want %v", ups, err, crashed[1:])
	}
}
