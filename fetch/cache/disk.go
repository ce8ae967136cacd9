package cache

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

var (
	diskMagic  = []byte("TDC2")
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

const (
	headerLen = 16
	tmpSuffix = ".tmp"
)

// disk is the disk tier: one file per chunk (see the package doc), LRU by
// access within a byte budget.
type disk struct {
	dir    string
	budget int64

	mu    sync.Mutex
	size  int64
	ll    *list.List // of *diskEntry, most recent first
	items map[string]*list.Element
}

type diskEntry struct {
	name string // file name: the key hash
	size int64  // file bytes
}

func hashName(k string) string {
	sum := sha256.Sum256([]byte(k))
	return hex.EncodeToString(sum[:])
}

func (d *disk) path(name string) string { return filepath.Join(d.dir, name[:2], name) }

// openDisk scans dir: chunk files enter the LRU oldest first, temporary
// files of interrupted writes are removed.
func openDisk(dir string, budget int64) (*disk, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	d := &disk{dir: dir, budget: budget, ll: list.New(), items: map[string]*list.Element{}}
	type found struct {
		name string
		size int64
		mod  time.Time
	}
	var files []found
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		if strings.HasSuffix(p, tmpSuffix) {
			return os.Remove(p)
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		if len(e.Name()) == 64 {
			files = append(files, found{e.Name(), info.Size(), info.ModTime()})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cache: scan %s: %w", dir, err)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].mod.Before(files[j].mod) })
	for _, f := range files {
		d.add(f.name, f.size)
	}
	d.evict()
	return d, nil
}

// add records a file as most recent (caller holds mu or is single).
func (d *disk) add(name string, size int64) {
	if e, ok := d.items[name]; ok {
		d.size -= e.Value.(*diskEntry).size
		e.Value.(*diskEntry).size = size
		d.ll.MoveToFront(e)
	} else {
		d.items[name] = d.ll.PushFront(&diskEntry{name: name, size: size})
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
// first byte and the bytes. A bad file is deleted (miss).
func (d *disk) get(k chunkKey) (int64, []byte, bool) {
	name := hashName(k.String())
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
		if from, data, ok := decode(raw); ok {
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

func checksum(from uint32, data []byte) uint32 {
	var f [4]byte
	binary.BigEndian.PutUint32(f[:], from)
	return crc32.Update(crc32.Checksum(f[:], castagnoli), castagnoli, data)
}

func decode(raw []byte) (int64, []byte, bool) {
	if len(raw) < headerLen || !bytes.Equal(raw[:4], diskMagic) {
		return 0, nil, false
	}
	from := binary.BigEndian.Uint32(raw[4:])
	n := binary.BigEndian.Uint32(raw[8:])
	data := raw[headerLen:]
	if int64(n) != int64(len(data)) || checksum(from, data) != binary.BigEndian.Uint32(raw[12:]) {
		return 0, nil, false
	}
	return int64(from), data, true
}

// put writes a chunk file atomically (temporary file, fsync, rename): the
// chunk's bytes from chunk-relative offset from.
func (d *disk) put(k chunkKey, from int64, data []byte) error {
	if int64(len(data)+headerLen) > d.budget {
		return nil
	}
	name := hashName(k.String())
	p := d.path(name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(p), name+".*"+tmpSuffix)
	if err != nil {
		return err
	}
	var hdr [headerLen]byte
	copy(hdr[:], diskMagic)
	binary.BigEndian.PutUint32(hdr[4:], uint32(from))
	binary.BigEndian.PutUint32(hdr[8:], uint32(len(data)))
	binary.BigEndian.PutUint32(hdr[12:], checksum(uint32(from), data))
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
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.add(name, int64(len(data)+headerLen))
	d.evict()
	return nil
}
