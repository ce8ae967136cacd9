package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/klauspost/compress/snappy"

	"github.com/tierd/tierd/internal/kafkalog/batch"
)

func TestRoundTrip(t *testing.T) {
	src := bytes.Repeat([]byte("kafka tiered storage "), 10000) // > one xerial block
	for _, c := range []batch.Codec{batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd} {
		comp, err := Kafka.Compress(c, []byte("prefix"), src)
		if err != nil {
			t.Fatal(c, err)
		}
		if !bytes.HasPrefix(comp, []byte("prefix")) {
			t.Errorf("%s: Compress did not append to dst", c)
		}
		out, err := Kafka.Decompress(c, comp[len("prefix"):], len(src))
		if err != nil || !bytes.Equal(out, src) {
			t.Errorf("%s: round trip: %v", c, err)
		}
	}
	if _, err := Kafka.Compress(batch.Codec(6), nil, src); !errors.Is(err, batch.ErrUnsupportedCodec) {
		t.Errorf("codec 6: %v", err)
	}
}

// TestSnappyFraming: Kafka's Java client writes xerial framing; other
// clients send one raw snappy block. Both must decode.
func TestSnappyFraming(t *testing.T) {
	src := bytes.Repeat([]byte("x"), 70000)
	comp, err := Kafka.Compress(batch.CodecSnappy, nil, src)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(comp, xerialMagic) || binary.BigEndian.Uint32(comp[8:]) != 1 || binary.BigEndian.Uint32(comp[12:]) != 1 {
		t.Fatalf("xerial header %x", comp[:16])
	}
	raw := snappy.Encode(nil, src)
	out, err := Kafka.Decompress(batch.CodecSnappy, raw, len(src))
	if err != nil || !bytes.Equal(out, src) {
		t.Fatalf("raw block: %v", err)
	}
	// A block length running past the payload is an error.
	bad := bytes.Clone(comp)
	binary.BigEndian.PutUint32(bad[16:], 1<<30)
	if _, err := Kafka.Decompress(batch.CodecSnappy, bad, len(src)); err == nil {
		t.Fatal("bad xerial block length accepted")
	}
	if _, err := Kafka.Decompress(batch.CodecSnappy, comp[:10], len(src)); err == nil {
		t.Fatal("truncated xerial header accepted")
	}
}
