package cache

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/conveyor-ml/conveyor/decode"
)

// TestMaxBytesAdmission fills a bounded cache: records are admitted until the next one
// would not fit, then Put returns ErrFull and the directory never grows past MaxBytes.
func TestMaxBytesAdmission(t *testing.T) {
	dir := t.TempDir()
	const max, w = 100_000, 32 // 32×32 raw records of about 3 KiB
	var logs int
	o := Options{Codec: Raw, MaxBytes: max, ShardBytes: 1 << 16, Logf: logTo(t, &logs)}
	c := open(t, dir, o)
	d := newCoder(t, c)
	n := 0
	for ; ; n++ {
		err := d.Put(testKey(n), n, testImage(uint64(n), w, w, true))
		if errors.Is(err, ErrFull) {
			break
		}
		if err != nil {
			t.Fatalf("Put %d: %v", n, err)
		}
		if s := c.Stats(); s.Full || s.Bytes > max || s.Bytes != diskBytes(t, dir) {
			t.Fatalf("after %d records: Stats %+v, %d bytes on disk", n+1, s, diskBytes(t, dir))
		}
	}
	s := c.Stats()
	if !s.Full || s.Rejected != 1 || s.Written != int64(n) || logs != 1 {
		t.Errorf("Stats %+v, %d log lines; want full after %d records, logged once", s, logs, n)
	}
	// Full means the next record, with its index entry, would not have fitted.
	if rec := int64(recordFixed + len(testKey(n).Path) + 3*w*w); s.Bytes+rec+idxFixed+recordFixed+int64(len(testKey(n).Path)) <= max {
		t.Errorf("full at %d bytes of %d, but a record of %d bytes fits", s.Bytes, max, rec)
	}
	if disk := diskBytes(t, dir); disk > max || disk != s.Bytes || len(files(t, dir, shardExt)) < 2 {
		t.Errorf("%d bytes in %d shards on disk, Stats says %d, MaxBytes %d", disk, len(files(t, dir, shardExt)), s.Bytes, max)
	}
	for i := range 3 {
		if err := d.Put(testKey(n+i), 0, testImage(1, w, w, true)); !errors.Is(err, ErrFull) {
			t.Errorf("Put once full: %v, want ErrFull", err)
		}
	}
	// A smaller record may still fit.
	if err := d.Put(testKey(n+10), 0, testImage(1, 1, 1, true)); err != nil && !errors.Is(err, ErrFull) {
		t.Errorf("Put of a tiny record: %v", err)
	}
	if disk := diskBytes(t, dir); disk > max {
		t.Errorf("%d bytes on disk, MaxBytes %d", disk, max)
	}
	checkAll(t, c, n, w)
	c.Close()

	// Reopened, the cache knows its size and admits nothing more of its own spec.
	c = open(t, dir, o)
	if s := c.Stats(); s.Bytes != diskBytes(t, dir) || s.Records < n {
		t.Errorf("reopened: Stats %+v, %d bytes on disk, %d records stored", s, diskBytes(t, dir), n)
	}
	if err := newCoder(t, c).Put(testKey(n+20), 0, testImage(1, w, w, true)); !errors.Is(err, ErrFull) {
		t.Errorf("Put into a full cache after reopening: %v, want ErrFull", err)
	}
	checkAll(t, c, n, w)
	if disk := diskBytes(t, dir); disk > max {
		t.Errorf("%d bytes on disk, MaxBytes %d", disk, max)
	}
}

// TestEviction stores spec A, then fills the bounded cache with spec B: A's shards are
// evicted oldest first, B's never, and Refs to A taken before still read.
func TestEviction(t *testing.T) {
	dir := t.TempDir()
	const w, nA = 32, 60
	keyA := func(i int) Key { k := testKey(i); k.Spec = "A"; return k }
	keyB := func(i int) Key { k := testKey(i); k.Spec = "B"; return k }
	a := open(t, dir, Options{Codec: Raw, ShardBytes: 1 << 16})
	da := newCoder(t, a)
	for i := range nA {
		put(t, da, keyA(i), i, testImage(uint64(i), w, w, true))
	}
	a.Close()
	shardsA := files(t, dir, shardExt)
	sizeA := diskBytes(t, dir)
	if len(shardsA) < 3 {
		t.Fatalf("spec A fills %d shards, want several", len(shardsA))
	}

	max := sizeA + 20_000
	var logs int
	c := open(t, dir, Options{Codec: Raw, MaxBytes: max, ShardBytes: 1 << 16, Logf: logTo(t, &logs)})
	d := newCoder(t, c)
	oldest := mustRef(t, c, keyA(0))
	var nB int
	for ; ; nB++ {
		err := d.Put(keyB(nB), nB, testImage(uint64(1000+nB), w, w, true))
		if errors.Is(err, ErrFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if disk := diskBytes(t, dir); disk > max || c.Stats().Bytes != disk {
			t.Fatalf("after %d records of B: %d bytes on disk, Stats says %d, MaxBytes %d", nB+1, disk, c.Stats().Bytes, max)
		}
		if nB == 10 {
			// Some of A is gone already, oldest first.
			if _, err := os.Stat(shardsA[0]); !os.IsNotExist(err) {
				t.Errorf("the oldest shard of A survives B's first records: %v", err)
			}
			if _, err := os.Stat(shardsA[len(shardsA)-1]); err != nil {
				t.Errorf("the newest shard of A went before older ones: %v", err)
			}
		}
	}
	s := c.Stats()
	if s.Evicted != int64(len(shardsA)) || !s.Full {
		t.Errorf("Stats %+v: want all %d shards of A evicted, then full", s, len(shardsA))
	}
	for _, f := range shardsA {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("shard %s of A survives: %v", filepath.Base(f), err)
		}
		if _, err := os.Stat(f[:len(f)-len(shardExt)] + indexExt); !os.IsNotExist(err) {
			t.Errorf("index of %s survives: %v", filepath.Base(f), err)
		}
	}
	if specs := c.Specs(); specs["A"] != 0 || specs["B"] != nB {
		t.Errorf("Specs = %v, want only %d of B", specs, nB)
	}
	if _, ok := c.Lookup(keyA(nA - 1)); ok {
		t.Error("an evicted record still looks up")
	}
	// B's records, all of them, are kept.
	for i := range nB {
		got, _ := mustLoad(t, c, d, keyB(i))
		if diff := samePixels(got, testImage(uint64(1000+i), w, w, true)); diff != "" {
			t.Errorf("B %d: %s", i, diff)
		}
	}
	// A Ref taken before its shard was evicted still reads.
	got, err := d.Load(new(decode.Image), oldest)
	if err != nil {
		t.Errorf("Load of a Ref taken before eviction: %v", err)
	} else if diff := samePixels(got, testImage(0, w, w, true)); diff != "" {
		t.Errorf("Load of a Ref taken before eviction: %s", diff)
	}
	if disk := diskBytes(t, dir); disk > max || disk != c.Stats().Bytes {
		t.Errorf("%d bytes on disk, Stats says %d, MaxBytes %d", disk, c.Stats().Bytes, max)
	}
	if logs != len(shardsA)+1 {
		t.Errorf("%d log lines, want one per evicted shard and one when full", logs)
	}
}

// TestEvictionSkipsLiveWriter stores two specs with one bounded Cache: the shard it is
// still writing for the first spec is not evicted to make room for the second.
func TestEvictionSkipsLiveWriter(t *testing.T) {
	dir := t.TempDir()
	const w = 32
	c := open(t, dir, Options{Codec: Raw, MaxBytes: 150_000, ShardBytes: 1 << 16})
	d := newCoder(t, c)
	keyA := func(i int) Key { k := testKey(i); k.Spec = "A"; return k }
	var nA int
	for ; nA < 25; nA++ { // at least one sealed shard and one live one
		put(t, d, keyA(nA), nA, testImage(uint64(nA), w, w, true))
	}
	for i := 0; ; i++ {
		err := d.Put(testKey(i), i, testImage(uint64(i), w, w, true))
		if errors.Is(err, ErrFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	s := c.Stats()
	if s.Evicted == 0 || !s.Full {
		t.Errorf("Stats %+v: want sealed shards of A evicted, then full", s)
	}
	if _, ok := c.Lookup(keyA(nA - 1)); !ok {
		t.Error("the last record of A, in the shard still being written, was evicted")
	}
	if _, ok := c.Lookup(keyA(0)); ok {
		t.Error("the first record of A, in a sealed shard, was not evicted")
	}
	if disk := diskBytes(t, dir); disk > 150_000 {
		t.Errorf("%d bytes on disk", disk)
	}
}

// TestEvictionSkipsOtherWriter bounds one Cache while another, on the same directory,
// is still writing a shard of another spec: that shard is locked and not evicted.
func TestEvictionSkipsOtherWriter(t *testing.T) {
	dir := t.TempDir()
	const w = 32
	other := open(t, dir, Options{Codec: Raw, ShardBytes: 1 << 16})
	od := newCoder(t, other)
	keyA := func(i int) Key { k := testKey(i); k.Spec = "A"; return k }
	for i := range 25 { // a sealed shard and a live one
		put(t, od, keyA(i), i, testImage(uint64(i), w, w, true))
	}
	c := open(t, dir, Options{Codec: Raw, MaxBytes: 150_000, ShardBytes: 1 << 16})
	d := newCoder(t, c)
	for i := 0; ; i++ {
		err := d.Put(testKey(i), i, testImage(uint64(i), w, w, true))
		if errors.Is(err, ErrFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if s := c.Stats(); s.Evicted != 1 {
		t.Errorf("Stats %+v: want the sealed shard of A evicted, not the live one", s)
	}
	live := mustRef(t, other, keyA(24))
	if _, err := os.Stat(filepath.Join(dir, live.Shard())); err != nil {
		t.Errorf("the shard another Cache is writing was evicted: %v", err)
	}
	put(t, od, keyA(25), 25, testImage(25, w, w, true))
	var inLive []int
	for i := range 26 {
		if r, ok := other.Lookup(keyA(i)); ok && r.Shard() == live.Shard() {
			inLive = append(inLive, i)
		}
	}
	other.Close()
	if len(inLive) < 2 {
		t.Fatalf("records %v in the live shard, want several", inLive)
	}
	reopened := open(t, dir, Options{ReadOnly: true})
	rd := newCoder(t, reopened)
	for _, i := range inLive {
		got, _ := mustLoad(t, reopened, rd, keyA(i))
		if diff := samePixels(got, testImage(uint64(i), w, w, true)); diff != "" {
			t.Errorf("record %d of A: %s", i, diff)
		}
	}
}
