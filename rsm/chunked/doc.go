// Package chunked is the chunked object form of a segment copy: an
// object's bytes cut into fixed-size chunks, each compressed with zstd
// (unless that does not pay) and, when the copy is encrypted, sealed
// with AES-256-GCM under the copy's data key, so that a read at any byte
// position fetches and decodes only the chunks it covers. It holds the
// format, the codec and the key envelope; package rsm writes and reads
// objects in this form and records its index in the copy's manifest.
//
// # Chunks
//
// An object of S original bytes with chunk size C (bytes) is
// ceil(S / C) chunks; chunk i holds original bytes [i*C, min((i+1)*C, S)).
// An empty object has no chunks. The stored object is the stored chunks
// one after the other, nothing between them. Stored chunk i is:
//
//	body    = zstd frame of the chunk's bytes   when flag Compressed
//	        = the chunk's bytes                 otherwise
//	stored  = nonce (12 bytes, random) || AES-256-GCM seal of body
//	                                            when flag Encrypted
//	        = body                              otherwise
//
// The seal's additional data binds a chunk to its place, so that a chunk
// moved to another position, object or copy, or relabelled, does not
// open:
//
//	"tierd/chunk/v1" 0x00 <copy id> 0x00 <object suffix> 0x00
//	<chunk number, uint32 big-endian> <flags, 1 byte>
//
// where the copy id is "<topic>-<partition>/<segment id>".
//
// # Chunk index
//
// The manifest records, for every object in chunked form, the chunk
// size, the original size, and the chunk index: for each chunk in order,
//
//	stored length   uvarint (bytes)
//	flags           1 byte: 0x01 Compressed, 0x02 Encrypted
//	crc32c          4 bytes, big-endian: CRC-32C (Castagnoli) of the
//	                stored chunk's bytes
//
// encoded with standard base64 (with padding) in the manifest's JSON. A
// chunk's stored position is the sum of the stored lengths before it. The
// CRC lets a reader detect damage
// to a single chunk it fetched; for an encrypted chunk the GCM tag
// detects it too, and detects deliberate change.
//
// # Compression and its heuristic
//
// A chunk is compressed when the setting allows and its frame is at most
// 15/16 of the chunk's size; otherwise it is stored as it came (flag
// Compressed clear). Before compressing a whole chunk, the heuristic
// compresses its first 64 KiB at the fastest level: when even that saves
// less than 1/16, the chunk (typically record batches the producer
// already compressed, or random bytes) is stored as it came without the
// full attempt. The zstd frames carry no content checksum (the chunk's
// CRC and, when sealed, its tag cover them).
//
// # Data key and its envelope
//
// An encrypted copy has its own data key: 32 random bytes, never stored
// in the clear. Two keys are derived from it with HKDF-SHA-256 (RFC 5869,
// no salt): the chunk key (info "tierd/chunk-key/v1"), which seals every
// chunk of every object of the copy, and the manifest key (info
// "tierd/manifest-mac/v1"), the HMAC-SHA-256 key that authenticates the
// manifest. The data key is wrapped by a key-encryption key (KEK) named
// by an id: with a KEK from a file, the wrapped key is
//
//	nonce (12 bytes, random) || AES-256-GCM seal of the data key
//
// under the KEK, with additional data "tierd/data-key/v1" 0x00 <copy id>,
// so that a wrapped key copied into another copy's manifest does not
// open. A KMS that wraps keys itself (KeyWrapper) stores whatever it
// returns. Re-wrapping (moving a copy to a newer KEK) unwraps and wraps
// the same data key again: no chunk is rewritten, and the manifest's
// authentication does not change.
//
// # Manifest authentication
//
// The MAC of an encrypted copy's manifest is the HMAC-SHA-256, under the
// manifest key, of the manifest's canonical bytes: its JSON object
// without the members "mac", "digest" and "encryption" (the envelope, which the
// wrap authenticates itself), members sorted by name, each value in its
// written form with insignificant white space removed (what
// encoding/json writes for a map of json.RawMessage). A manifest edited
// in any member, or one swapped in from another copy (its data key does
// not open under this copy's id), is refused. A copy that is not
// encrypted has no secret to authenticate with; its manifest carries
// instead a "digest", the SHA-256 of the same canonical bytes, which
// finds damage (a flipped byte) but not a deliberate edit, and each
// chunk is checked by its CRC.
package chunked
