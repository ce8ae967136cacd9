package rsm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/tierd/tierd/internal/remotelog"
	"github.com/tierd/tierd/rsm/chunked"
)

// This file writes and reads copies in chunked form (package chunked).

// ChunkedInfo is the manifest's record of an object in chunked form.
type ChunkedInfo struct {
	ChunkBytes   int64 `json:"chunkBytes"`   // original bytes per chunk
	OriginalSize int64 `json:"originalSize"` // bytes of the object as it came
	// OriginalCRC32C is the CRC-32C of the original bytes, 8 lowercase
	// hex digits; "" when the copy is encrypted (it would tell of the
	// plaintext; the chunks' seals cover it).
	OriginalCRC32C string `json:"originalCrc32c,omitempty"`
	// Chunks is the chunk index (package chunked, "Chunk index").
	Chunks string `json:"chunks"`
}

// Envelope is an encrypted copy's wrapped data key.
type Envelope struct {
	Algorithm  string `json:"algorithm"` // "AES-256-GCM"
	KEKID      string `json:"kekId"`     // the key-encryption key that wraps it
	WrappedKey []byte `json:"wrappedKey"`
}

const envelopeAlgorithm = "AES-256-GCM"

// Form is the copy's form: remotelog.FormChunked for a manifest of
// ChunkedFormatVersion, "" otherwise.
func (mf *Manifest) Form() string {
	if mf.FormatVersion >= ChunkedFormatVersion {
		return remotelog.FormChunked
	}
	return ""
}

// storedLogSize is the stored .log's bytes of a chunked copy, 0 otherwise.
func (mf *Manifest) storedLogSize() int64 {
	if mf.Form() == "" {
		return 0
	}
	return mf.Objects[logSuffix].Size
}

// copyID names a copy in its keys' additional data.
func copyID(tp remotelog.TopicPartition, id remotelog.SegmentID) string {
	return tp.String() + "/" + id.String()
}

// NewCopyForm is the form new copies take by this Manager's Config
// (SegmentMetadata.Form): remotelog.FormChunked when Objects compresses or
// encrypts, "" otherwise. A copier writes it into the COPY_SEGMENT_STARTED
// row, so that readers of the row know how to read the copy.
func (m *Manager) NewCopyForm() string {
	if m.cfg.Objects.Chunked() {
		return remotelog.FormChunked
	}
	return ""
}

// startChunked makes mf a chunked copy's manifest when the row asks for
// the chunked form, and returns its keys (nil when it is not encrypted):
// a new data key, wrapped by the current KEK. Errors: an unknown form,
// the key wrapper's.
func (m *Manager) startChunked(ctx context.Context, form string, mf *Manifest) (*chunked.CopyKeys, error) {
	switch form {
	case "":
		return nil, nil
	case remotelog.FormChunked:
	default:
		return nil, fmt.Errorf("rsm: copy of form %q; this tierd writes %q or %q", form, "", remotelog.FormChunked)
	}
	mf.FormatVersion = ChunkedFormatVersion
	if !m.cfg.Objects.Encryption {
		return nil, nil
	}
	id := copyID(remotelog.TopicPartition{Topic: mf.Topic, Partition: mf.Partition}, mf.SegmentID)
	dk, err := chunked.NewDataKey()
	if err != nil {
		return nil, err
	}
	kek := m.cfg.Keys.Current()
	wrapped, err := m.cfg.Keys.Wrap(ctx, kek, dk, chunked.WrapAAD(id))
	if err != nil {
		m.cfg.Metrics.failedWrap()
		return nil, fmt.Errorf("rsm: wrap the data key of %s under %q: %w", id, kek, err)
	}
	mf.Encryption = &Envelope{Algorithm: envelopeAlgorithm, KEKID: kek, WrappedKey: wrapped}
	return chunked.DeriveKeys(dk, id)
}

// manifestBody returns the manifest's bytes; a chunked copy's with its
// MAC (keys not nil) or its digest.
func manifestBody(mf *Manifest, keys *chunked.CopyKeys) ([]byte, error) {
	body, err := json.MarshalIndent(mf, "", "  ")
	if err != nil || mf.Form() == "" {
		return body, err
	}
	canon, err := chunked.Canonical(body)
	if err != nil {
		return nil, err
	}
	if keys != nil {
		mf.MAC = keys.MAC(canon)
	} else {
		mf.Digest = chunked.Digest(canon)
	}
	return json.MarshalIndent(mf, "", "  ")
}

// checkChunked checks what ReadManifest reads of a chunked copy: every
// object's chunk index; when encrypted, the envelope (unwrapped with the
// Manager's keys, which it returns) and the MAC over data; else the
// digest. Errors: ErrBadManifest, chunked.ErrKeyUnavailable naming the
// KEK, chunked.ErrWrongKey, chunked.ErrBadMAC (all wrapped, naming key).
func (m *Manager) checkChunked(ctx context.Context, key string, data []byte, mf *Manifest) (*chunked.CopyKeys, error) {
	if mf.FormatVersion < ChunkedFormatVersion {
		if mf.Encryption != nil || mf.MAC != "" || mf.Digest != "" {
			return nil, fmt.Errorf("%w %s: format version %d cannot be chunked or encrypted", ErrBadManifest, key, mf.FormatVersion)
		}
		return nil, nil
	}
	for suffix, o := range mf.Objects {
		if o.Chunked == nil {
			return nil, fmt.Errorf("%w %s: object %s of a chunked copy has no chunk index", ErrBadManifest, key, suffix)
		}
		if _, err := o.layout(); err != nil {
			return nil, fmt.Errorf("%w %s: object %s: %v", ErrBadManifest, key, suffix, err)
		}
	}
	if o := mf.Objects[logSuffix]; o.Chunked.OriginalSize != mf.SizeInBytes {
		return nil, fmt.Errorf("%w %s: .log of %d original bytes, copy of %d", ErrBadManifest, key, o.Chunked.OriginalSize, mf.SizeInBytes)
	}
	keys, err := m.openKeys(ctx, key, mf)
	if err != nil {
		return nil, err
	}
	canon, err := chunked.Canonical(data)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrBadManifest, key, err)
	}
	if keys != nil {
		err = keys.CheckMAC(canon, mf.MAC)
	} else if mf.MAC != "" {
		err = fmt.Errorf("%w: a MAC without an envelope", chunked.ErrBadMAC)
	} else {
		err = chunked.CheckDigest(canon, mf.Digest)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return keys, nil
}

// openKeys unwraps an encrypted copy's data key; nil keys for a copy that
// is not encrypted.
func (m *Manager) openKeys(ctx context.Context, key string, mf *Manifest) (*chunked.CopyKeys, error) {
	if mf.Encryption == nil {
		return nil, nil
	}
	e := mf.Encryption
	if e.Algorithm != envelopeAlgorithm {
		return nil, fmt.Errorf("%w %s: encryption %q, this tierd knows %s", ErrBadManifest, key, e.Algorithm, envelopeAlgorithm)
	}
	if m.cfg.Keys == nil {
		return nil, fmt.Errorf("%s: copy encrypted under key-encryption key %q and this tierd has no keys (encryption.keys): %w", key, e.KEKID, chunked.ErrKeyUnavailable)
	}
	id := copyID(remotelog.TopicPartition{Topic: mf.Topic, Partition: mf.Partition}, mf.SegmentID)
	dk, err := m.cfg.Keys.Unwrap(ctx, e.KEKID, e.WrappedKey, chunked.WrapAAD(id))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return chunked.DeriveKeys(dk, id)
}

// layout parses the object's chunk index.
func (o ObjectInfo) layout() (*chunked.Layout, error) {
	chunks, err := chunked.DecodeIndex(o.Chunked.Chunks)
	if err != nil {
		return nil, err
	}
	l, err := chunked.NewLayout(o.Chunked.ChunkBytes, o.Chunked.OriginalSize, chunks)
	if err != nil {
		return nil, err
	}
	if l.StoredSize() != o.Size {
		return nil, fmt.Errorf("%w: chunks of %d stored bytes in an object of %d", chunked.ErrBadIndex, l.StoredSize(), o.Size)
	}
	return l, nil
}

// checkForm checks that the manifest read from key has the form the row
// meta records: the same form, and encrypted when the row says so (the
// row, in tierd's own metadata, was written from the manifest tierd
// wrote, so a copy replaced in the bucket by one in another form, or by
// an unencrypted one that needs no key, is refused). Errors:
// ErrBadManifest (wrapped).
func checkForm(key string, meta remotelog.SegmentMetadata, mf *Manifest) error {
	if mf.Form() != meta.Form {
		return fmt.Errorf("%w %s: a copy of form %q, its row says %q: replaced in the bucket?", ErrBadManifest, key, mf.Form(), meta.Form)
	}
	if meta.Encrypted && mf.Encryption == nil {
		return fmt.Errorf("%w %s: not encrypted, its row says the copy was: replaced in the bucket?", ErrBadManifest, key)
	}
	return nil
}

// copyLayout is what reads of a chunked copy need: its manifest's
// object layouts and its keys.
type copyLayout struct {
	objects map[string]*chunked.Layout
	keys    *chunked.CopyKeys // nil: not encrypted
}

func (c *copyLayout) sealer() *chunked.Sealer {
	if c.keys == nil {
		return nil
	}
	return c.keys.Sealer
}

// layoutCacheEntries bounds the copies whose layouts a Manager keeps (the
// least recently read go first): a few KiB each.
const layoutCacheEntries = 4096

// Forget drops what the Manager keeps of a copy's layout and keys (after
// a re-wrap or a delete).
func (m *Manager) Forget(id remotelog.SegmentID) { m.layouts.Remove(id) }

// layoutOf returns a chunked copy's layout, reading its manifest on the
// first read. The manifest must describe meta.
func (m *Manager) layoutOf(ctx context.Context, meta remotelog.SegmentMetadata) (*copyLayout, error) {
	if l, ok := m.layouts.Get(meta.ID); ok {
		return l, nil
	}
	key := m.Key(meta, manifestSuffix)
	mf, keys, err := m.readManifest(ctx, key)
	if err != nil {
		return nil, err
	}
	if mf.SegmentID != meta.ID || mf.Topic != meta.TopicPartition.Topic || mf.Partition != meta.TopicPartition.Partition {
		return nil, fmt.Errorf("%w %s: describes another copy", ErrBadManifest, key)
	}
	if err := checkForm(key, meta, mf); err != nil {
		return nil, err
	}
	cl := &copyLayout{objects: map[string]*chunked.Layout{}, keys: keys}
	for suffix, o := range mf.Objects {
		if cl.objects[suffix], err = o.layout(); err != nil {
			return nil, fmt.Errorf("%w %s: %v", ErrBadManifest, key, err)
		}
	}
	m.layouts.Put(meta.ID, cl)
	return cl, nil
}

// fetchChunked reads original bytes [start, end) of a chunked copy's .log.
func (m *Manager) fetchChunked(ctx context.Context, meta remotelog.SegmentMetadata, start, end int64) (io.ReadCloser, error) {
	cl, err := m.layoutOf(ctx, meta)
	if err != nil {
		return nil, err
	}
	if start < 0 {
		return nil, fmt.Errorf("%s: negative offset %d", m.Key(meta, logSuffix), start)
	}
	l := cl.objects[logSuffix]
	if end < 0 || end > l.OriginalSize {
		end = l.OriginalSize
	}
	if start >= end {
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	off, n, _, _ := l.StoredRange(start, end)
	rc, err := m.b.GetRange(ctx, m.Key(meta, logSuffix), off, n)
	if err != nil {
		return nil, err
	}
	// Decoded ahead of the caller: a chunk decodes while the next arrives.
	ra := chunked.NewReadAhead(rc, m.codec, l, cl.sealer(), logSuffix, start, end)
	if m.cfg.Metrics == nil {
		return ra, nil
	}
	return struct {
		io.Reader
		io.Closer
	}{&countedReader{r: ra, om: m.cfg.Metrics, encrypted: cl.keys != nil}, ra}, nil
}

// fetchChunkedObject reads and decodes a whole object of a chunked copy.
func (m *Manager) fetchChunkedObject(ctx context.Context, meta remotelog.SegmentMetadata, suffix string) ([]byte, error) {
	cl, err := m.layoutOf(ctx, meta)
	if err != nil {
		return nil, err
	}
	l, ok := cl.objects[suffix]
	if !ok {
		return nil, fmt.Errorf("%w: %s: copy has no %s object", ErrNotFound, meta.ID, suffix)
	}
	rc, err := m.b.GetRange(ctx, m.Key(meta, suffix), 0, -1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var out bytes.Buffer
	out.Grow(int(l.OriginalSize))
	if _, err := chunked.NewReader(rc, m.codec, l, cl.sealer(), suffix, 0, l.OriginalSize).WriteTo(&out); err != nil {
		return nil, m.cfg.Metrics.failed(fmt.Errorf("read %s: %w", m.Key(meta, suffix), err), cl.keys != nil)
	}
	return out.Bytes(), nil
}

// bufferedEncodeBytes is the largest object (original bytes) whose
// chunked form is encoded whole in memory and stored with one PUT of a
// known size, as a plain object of its size is; larger ones stream, of a
// size not known in advance (a multipart upload).
const bufferedEncodeBytes = 8 << 20

// encodeUpload uploads src's size original bytes in chunked form under
// key and returns their ObjectInfo (stored size and CRC-32C, chunk
// index). Errors: src's, the upload's.
func (m *Manager) encodeUpload(ctx context.Context, key, suffix string, src io.Reader, size int64, keys *chunked.CopyKeys, files SegmentFiles) (ObjectInfo, error) {
	var s *chunked.Sealer
	if keys != nil {
		s = keys.Sealer
	}
	enc := chunked.NewEncoder(src, m.codec, s, suffix)
	h := crc32.New(castagnoli)
	cr := &countingReader{r: io.TeeReader(files.throttled(ctx, enc), h)}
	var body io.Reader = cr
	stored := int64(-1)
	if size <= bufferedEncodeBytes {
		data, err := io.ReadAll(cr)
		if err != nil {
			return ObjectInfo{}, fmt.Errorf("upload %s: %w", key, err)
		}
		body, stored = bytes.NewReader(data), int64(len(data))
	}
	if err := m.b.Upload(ctx, key, body, stored); err != nil {
		return ObjectInfo{}, fmt.Errorf("upload %s: %w", key, err)
	}
	l, err := enc.Layout()
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("upload %s: %w", key, err)
	}
	m.cfg.Metrics.wrote(enc, cr.n)
	info := &ChunkedInfo{ChunkBytes: l.ChunkBytes, OriginalSize: l.OriginalSize, Chunks: chunked.EncodeIndex(l.Chunks)}
	if keys == nil {
		info.OriginalCRC32C = crc32cHex(enc.OriginalCRC32C())
	}
	return ObjectInfo{Key: key, Size: cr.n, CRC32C: crc32cHex(h.Sum32()), Chunked: info}, nil
}
