package cache

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

var (
	diskMagic  = []byte("TDC3")
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

const (
	headerLen = 48 // magic, from, length, crc, name hash
	tmpSuffix = ".tmp"
)

// disk is the disk tier: one file per chunk (see the package doc), LRU by
// access within a byte budget.
type disk struct {
	dir        string
	budget     int64
	chunkBytes int64

	mu    sync.Mutex
	size  int64
	ll    *list.List // of *diskEntry, most recent first
	items map[string]*list.Element
}

type diskEntry struct {
	name string // file name: the key hash
	size int64  // file bytes
	// from is the chunk-relative offset of the file's first data byte (it
	// holds [from, from+size-headerLen)); -1 when not known (a file found
	// by the scan at open and not read since).
	from int64
}

func hashName(k string) string {
	sum := sha256.Sum256([]byte(k))
	return hex.EncodeToString(sum[:])
}

// name is a chunk's file name: the hash of its key and the chunk size, so
// that files written with another remote.fetch.chunk.bytes are never
// taken for this size's chunks.
func (d *disk) name(k chunkKey) string {
	return hashName(k.String() + "\x00" + strconv.FormatInt(d.chunkBytes, 10))
}

func (d *disk) path(name string) string { return filepath.Join(d.dir, name[:2], name) }

// openDisk scans dir: chunk files (<2 hex>/<64 hex>) enter the LRU
// oldest first; temporary files of interrupted writes
// (<2 hex>/<64 hex>.*.tmp) are removed. Nothing else in dir is touched.
func openDisk(dir string, budget, chunkBytes int64) (*disk, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	d := &disk{dir: dir, budget: budget, chunkBytes: chunkBytes, ll: list.New(), items: map[string]*list.Element{}}
	type found struct {
		name string
		size int64
		mod  time.Time
	}
	var files []found
	subs, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cache: scan %s: %w", dir, err)
	}
	for _, sub := range subs {
		if !sub.IsDir() || len(sub.Name()) != 2 || !isHex(sub.Name()) {
			continue
		}
		ents, err := os.ReadDir(filepath.Join(dir, sub.Name()))
		if err != nil {
			return nil, fmt.Errorf("cache: scan %s: %w", dir, err)
		}
		for _, e := range ents {
			name := e.Name()
			if e.IsDir() || len(name) < 64 || !isHex(name[:64]) || name[:2] != sub.Name() {
				continue
			}
			if len(name) > 64 && strings.HasSuffix(name, tmpSuffix) && name[64] == '.' {
				os.Remove(filepath.Join(dir, sub.Name(), name))
				continue
			}
			info, err := e.Info()
			if len(name) != 64 || err != nil {
				continue
			}
			files = append(files, found{name, info.Size(), info.ModTime()})
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].mod.Before(files[j].mod) })
	for _, f := range files {
		d.add(f.name, f.size, -1)
	}
	d.evict()
	return d, nil
}

func isHex(s string) bool {
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// add records a file as most recent (caller holds mu or is single); from
// is the chunk-relative offset of its first data byte, -1 when unknown.
func (d *disk) add(name string, size, from int64) {
	if e, ok := d.items[name]; ok {
		de := e.Value.(*diskEntry)
		d.size -= de.size
		de.size, de.from = size, from
		d.ll.MoveToFront(e)
	} else {
		d.items[name] = d.ll.PushFront(&diskEntry{name: name, size: size, from: from})
	}
	d.size += size
}

// evict removes least recently used files until the tier fits its budget.
func (d *disk) evict() {
	for d.size > d.budget && d.ll.Len() > 0 {
		last := d.ll.Back()
		e := last.Value.(*diskEntry)
		d.ll.Remove(last)
		delete(d.items, e.name)
		d.size -= e.size
		os.Remove(d.path(e.name)) // an open reader keeps its file
	}
}

// get reads and verifies a chunk file: the chunk-relative offset of its
// first byte and the bytes. A bad file, or one holding another chunk, is
// deleted (miss).
func (d *disk) get(k chunkKey) (int64, []byte, bool) {
	name := d.name(k)
	d.mu.Lock()
	e, ok := d.items[name]
	if ok {
		d.ll.MoveToFront(e)
	}
	d.mu.Unlock()
	if !ok {
		return 0, nil, false
	}
	raw, err := os.ReadFile(d.path(name))
	if err == nil {
		if from, data, ok := decode(raw, name); ok {
			d.mu.Lock()
			// A scanned file's range, now known; a file put wrote since
			// has its own already.
			if e, ok := d.items[name]; ok && e.Value.(*diskEntry).from < 0 && e.Value.(*diskEntry).size == int64(len(raw)) {
				e.Value.(*diskEntry).from = from
			}
			d.mu.Unlock()
			return from, data, true
		}
	}
	d.drop(name)
	return 0, nil, false
}

// clear removes every chunk file.
func (d *disk) clear() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for name := range d.items {
		os.Remove(d.path(name))
	}
	d.ll.Init()
	d.items = map[string]*list.Element{}
	d.size = 0
}

func (d *disk) drop(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.items[name]; ok {
		d.ll.Remove(e)
		delete(d.items, name)
		d.size -= e.Value.(*diskEntry).size
	}
	os.Remove(d.path(name))
}

func checksum(from uint32, name string, data []byte) uint32 {
	var f [4]byte
	binary.BigEndian.PutUint32(f[:], from)
	crc := crc32.Checksum(f[:], castagnoli)
	crc = crc32.Update(crc, castagnoli, []byte(name[:32]))
	return crc32.Update(crc, castagnoli, data)
}

// decode checks a chunk file's header against its name and its CRC.
func decode(raw []byte, name string) (int64, []byte, bool) {
	if len(raw) < headerLen || !bytes.Equal(raw[:4], diskMagic) {
		return 0, nil, false
	}
	from := binary.BigEndian.Uint32(raw[4:])
	n := binary.BigEndian.Uint32(raw[8:])
	id, err := hex.DecodeString(name[:64])
	if err != nil || !bytes.Equal(raw[16:48], id) {
		return 0, nil, false // another chunk's file under this name
	}
	data := raw[headerLen:]
	if int64(n) != int64(len(data)) || checksum(from, string(id), data) != binary.BigEndian.Uint32(raw[12:]) {
		return 0, nil, false
	}
	return int64(from), data, true
}

// coversLocked reports whether the tier's file for name holds every byte
// of a file of size bytes from chunk-relative offset from (caller holds
// mu): a file whose range is not known yet (scanned at open, not read
// since) when it is larger, as a larger file most likely holds more of
// what readers read.
func (d *disk) coversLocked(name string, from, size int64) bool {
	e, ok := d.items[name]
	if !ok {
		return false
	}
	de := e.Value.(*diskEntry)
	if de.from < 0 {
		return de.size > size
	}
	return de.from <= from && de.from+de.size >= from+size
}

// holds reports whether the tier has a file for k of at least n data
// bytes (not read: a bad file is found by the read that takes it).
func (d *disk) holds(k chunkKey, n int64) bool {
	name := d.name(k)
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.items[name]
	return ok && e.Value.(*diskEntry).size >= n+headerLen
}

// put writes a chunk file atomically (temporary file, fsync, rename): the
// chunk's bytes from chunk-relative offset from. A file of the chunk
// that holds all of those bytes already stays (a part never replaces the
// whole chunk, nor a larger part around it): loads of one chunk end their
// disk writes in any order. A part of another region of the chunk
// replaces the file, as the region read last.
func (d *disk) put(k chunkKey, from int64, data []byte) error {
	name := d.name(k)
	size := int64(len(data) + headerLen)
	d.mu.Lock()
	budget := d.budget // a reload may change it (SetBudgets)
	covered := d.coversLocked(name, from, size)
	d.mu.Unlock()
	if size > budget || covered {
		return nil
	}
	p := d.path(name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(p), name+".*"+tmpSuffix)
	if err != nil {
		return err
	}
	id, _ := hex.DecodeString(name)
	var hdr [headerLen]byte
	copy(hdr[:], diskMagic)
	binary.BigEndian.PutUint32(hdr[4:], uint32(from))
	binary.BigEndian.PutUint32(hdr[8:], uint32(len(data)))
	binary.BigEndian.PutUint32(hdr[12:], checksum(uint32(from), string(id), data))
	copy(hdr[16:], id)
	_, err = f.Write(hdr[:])
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.coversLocked(name, from, size) { // a write of a part around it ended meanwhile
		os.Remove(f.Name())
		return nil
	}
	if err := os.Rename(f.Name(), p); err != nil {
		os.Remove(f.Name())
		return err
	}
	d.add(name, size, from)
	d.evict()
	return nil
}
