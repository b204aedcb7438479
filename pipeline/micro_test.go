package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/conveyor-ml/conveyor/gpu/gputest"
	"github.com/conveyor-ml/conveyor/internal/treetest"
)

// microEpoch runs epoch e from cursor and returns what it delivered, concatenated, with
// each micro-batch's numbering checked against the positions it holds. The pixels are
// read from the device when the loader has one (not the cpu device without
// Device.Cast, whose batches are the host bytes).
func microEpoch(t *testing.T, ld *Loader, e, cursor int) (d epochData, numbers []string) {
	t.Helper()
	bs, k := ld.cfg.Batch.Size, ld.cfg.Batch.MicroBatches
	m := bs / k
	n := ld.SamplesPerEpoch()
	if ld.cfg.Batch.DropLast {
		n -= n % bs
	}
	fromDevice := ld.Stats().Device.Bytes > 0 // otherwise the device's batches are the host bytes
	pos := cursor
	for b, err := range ld.EpochFrom(context.Background(), e, cursor) {
		if err != nil {
			t.Fatalf("epoch %d: %v", e, err)
		}
		first := pos / bs * bs
		whole := min(bs, n-first)
		want := Batch{Number: pos / bs, Micro: (pos - first) / m, Micros: (whole + m - 1) / m, Len: min(m, n-pos), BatchLen: whole, Cursor: pos + min(m, n-pos)}
		if b.Number != want.Number || b.Micro != want.Micro || b.Micros != want.Micros || b.Len != want.Len || b.BatchLen != want.BatchLen || b.Cursor != want.Cursor {
			t.Fatalf("at position %d: batch %d micro %d/%d len %d of %d cursor %d, want batch %d micro %d/%d len %d of %d cursor %d",
				pos, b.Number, b.Micro, b.Micros, b.Len, b.BatchLen, b.Cursor, want.Number, want.Micro, want.Micros, want.Len, want.BatchLen, want.Cursor)
		}
		if b.Shape[0] != b.Len || len(b.Labels) != b.Len || len(b.Indices) != b.Len {
			t.Fatalf("%s: shape %v, %d labels, %d indices for %d samples", b.name(), b.Shape, len(b.Labels), len(b.Indices), b.Len)
		}
		pos = b.Cursor
		numbers = append(numbers, fmt.Sprintf("%d.%d/%d", b.Number, b.Micro, b.Micros))
		if fromDevice {
			if err := b.Wait(); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, b.DeviceBytes())
			if err := b.slot.Read(got); err != nil {
				t.Fatal(err)
			}
			d.data = append(d.data, got...)
		} else {
			d.data = append(d.data, b.Data...)
		}
		d.labels = append(d.labels, b.Labels...)
		d.indices = append(d.indices, b.Indices...)
		d.lens = append(d.lens, b.Len)
		d.batches++
		b.Release()
	}
	if pos != n {
		t.Fatalf("epoch ended at position %d of %d", pos, n)
	}
	return d, numbers
}

// Micro-batches concatenated are the whole batches, pixels included (the train recipe's
// crops, flips and colour jitter are seeded per sample, not per batch), with the same
// labels and indices, whatever the split, the short last batch, DropLast, the rank or
// the device. Pinned buffers and device buffers hold one micro-batch.
func TestMicroBatchesEqualWholeBatches(t *testing.T) {
	src, err := Dir(treetest.Shared(t)) // 60 samples
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		micro     int
		dropLast  bool
		rank      int
		world     int
		device    string
		convert   bool
		wantBatch []string // the first and last micro-batches' numbering
	}{
		// 60 samples: batches of 16, 16, 16 and 12 (30 a rank: 16 and 14).
		{name: "2", micro: 2, wantBatch: []string{"0.0/2", "3.1/2"}},
		{name: "4", micro: 4, wantBatch: []string{"0.0/4", "3.2/3"}},
		{name: "16-singles", micro: 16, wantBatch: []string{"0.0/16", "3.11/12"}},
		{name: "8-droplast", micro: 8, dropLast: true, wantBatch: []string{"0.0/8", "2.7/8"}},
		{name: "4-rank1of2", micro: 4, rank: 1, world: 2, wantBatch: []string{"0.0/4", "1.3/4"}},
		{name: "4-cuda", micro: 4, device: "cuda:0", wantBatch: []string{"0.0/4", "3.2/3"}},
		{name: "4-cuda-convert", micro: 4, device: "cuda:0", convert: true, wantBatch: []string{"0.0/4", "3.2/3"}},
		{name: "2-cpu-convert", micro: 2, device: "cpu", convert: true, wantBatch: []string{"0.0/2", "3.1/2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.device == "cuda:0" {
				f := gputest.Use(t) // skips without the stand-in driver
				t.Cleanup(func() {  // after the loaders' Close
					if f.Allocated() != 0 || f.Registered() != 0 {
						t.Errorf("after Close: %d device bytes, %d registered ranges", f.Allocated(), f.Registered())
					}
				})
			}
			config := func(micro int) *Config {
				cfg := testConfig(2)
				cfg.Batch.Size, cfg.Batch.MicroBatches, cfg.Batch.DropLast = 16, micro, c.dropLast
				cfg.Order.Rank, cfg.Order.World = c.rank, c.world
				cfg.Device.Name, cfg.Device.Cast = c.device, c.convert
				return cfg
			}
			whole := newLoader(t, src, config(1))
			want, _ := microEpoch(t, whole, 2, 0)
			ld := newLoader(t, src, config(c.micro))
			got, numbers := microEpoch(t, ld, 2, 0)
			if !bytes.Equal(got.data, want.data) || !slices.Equal(got.labels, want.labels) || !slices.Equal(got.indices, want.indices) {
				t.Fatalf("%d micro-batches concatenated differ from the whole batches (%d vs %d samples)", c.micro, len(got.indices), len(want.indices))
			}
			if first, last := numbers[0], numbers[len(numbers)-1]; first != c.wantBatch[0] || last != c.wantBatch[1] {
				t.Errorf("micro-batches run %s ... %s, want %s ... %s", first, last, c.wantBatch[0], c.wantBatch[1])
			}
			if ld.Len() != whole.Len() {
				t.Errorf("Len %d, whole batches' %d", ld.Len(), whole.Len())
			}

			ws, ms := whole.Stats(), ld.Stats()
			if ms.Batches != int64(got.batches) || ms.Device.Copies != int64(got.batches) {
				t.Errorf("Stats: %d batches, %d copies, want %d delivered", ms.Batches, ms.Device.Copies, got.batches)
			}
			if ms.Memory.Pinned.BufferSize*c.micro != ws.Memory.Pinned.BufferSize || ms.Memory.Pinned.BufferSize != 16/c.micro*ld.sampleBytes {
				t.Errorf("pinned buffers of %d bytes, whole batches' %d: want 1/%d", ms.Memory.Pinned.BufferSize, ws.Memory.Pinned.BufferSize, c.micro)
			}
			// Buffers as the tuner left them: Prefetch+1 at the start, more when it raised
			// the batches in flight (on a loaded machine), each one micro-batch.
			if want := int64(ms.Memory.Pinned.Buffers) * pageRound(int64(ms.Memory.Pinned.BufferSize)); ms.Memory.Pinned.BytesMapped != want || ms.Memory.Pinned.Buffers < ld.Config().Tuning.Prefetch+1 {
				t.Errorf("%d pinned bytes mapped in %d buffers, want %d (at least %d buffers)", ms.Memory.Pinned.BytesMapped, ms.Memory.Pinned.Buffers, want, ld.Config().Tuning.Prefetch+1)
			}
			if c.device != "" || c.convert {
				if ms.Device.Bytes == 0 || ms.Device.Bytes*int64(c.micro) != ws.Device.Bytes {
					t.Errorf("%d device bytes, whole batches' %d: want 1/%d", ms.Device.Bytes, ws.Device.Bytes, c.micro)
				}
				if ms.Device.Slots != ld.cfg.Tuning.Prefetch || ms.Device.SlotBytes*int64(c.micro) != ws.Device.SlotBytes || ms.Device.SlotBytes != int64(16/c.micro*3*24*24*ld.cfg.Pack.DType.Size()) {
					t.Errorf("%d device buffers of %d bytes, whole batches' %d", ms.Device.Slots, ms.Device.SlotBytes, ws.Device.SlotBytes)
				}
			} else if ms.Device.Bytes != 0 || ms.Device.Slots != 0 || ms.Device.SlotBytes != 0 {
				t.Errorf("cpu device holds %d bytes (%d buffers of %d), want none", ms.Device.Bytes, ms.Device.Slots, ms.Device.SlotBytes)
			}
		})
	}
}

// A cursor taken after any micro-batch resumes with the next micro-batch, in the middle
// of a batch or at its start; a cursor inside a micro-batch is refused.
func TestMicroBatchResume(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(2)
	cfg.Batch.Size, cfg.Batch.MicroBatches = 16, 4
	ld := newLoader(t, src, cfg)
	full, _ := microEpoch(t, ld, 3, 0)
	for _, stopAfter := range []int{1, 6, 8, 14} { // 6: batch 1's second micro-batch; 14: in the short last batch
		var cursor, number, micro int
		n := 0
		for b, err := range ld.Epoch(context.Background(), 3) {
			if err != nil {
				t.Fatal(err)
			}
			cursor, number, micro = b.Cursor, b.Number, b.Micro
			b.Release()
			if n++; n == stopAfter {
				break
			}
		}
		rest, next := microEpoch(t, ld, 3, cursor)
		off := cursor * ld.sampleBytes
		if !bytes.Equal(rest.data, full.data[off:]) || !slices.Equal(rest.indices, full.indices[cursor:]) || !slices.Equal(rest.labels, full.labels[cursor:]) {
			t.Fatalf("resuming after micro-batch %d.%d at %d does not reproduce the rest of the epoch", number, micro, cursor)
		}
		wantNext := fmt.Sprintf("%d.%d/", number, micro+1)
		if micro == 3 {
			wantNext = fmt.Sprintf("%d.0/", number+1)
		}
		if !strings.HasPrefix(next[0], wantNext) {
			t.Errorf("resuming after %d.%d: first micro-batch %s, want %s", number, micro, next[0], wantNext)
		}
	}
	for _, c := range []struct {
		cursor int
		want   string
	}{
		{2, "cursor 2 is not a micro-batch boundary of an epoch of 60 samples (batch 16 in 4 micro-batches of 4)"},
		{18, "cursor 18 is not a micro-batch boundary"},
		{64, "cursor 64 is not"},
		{-4, "cursor -4 is not"},
	} {
		var got error
		for _, err := range ld.EpochFrom(context.Background(), 3, c.cursor) {
			got = err
		}
		if got == nil || !strings.Contains(got.Error(), c.want) {
			t.Errorf("cursor %d: got %v, want %q", c.cursor, got, c.want)
		}
	}
}

func TestMicroBatchesValidated(t *testing.T) {
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		batch, micro int
		want         string // "" when valid
	}{
		{16, -1, "MicroBatches -1 < 1"},
		{16, 3, "MicroBatches 3 does not divide BatchSize 16"},
		{16, 32, "MicroBatches 32 does not divide BatchSize 16"},
		{6, 4, "MicroBatches 4 does not divide BatchSize 6"},
		{0, 5, "MicroBatches 5 does not divide BatchSize 64"}, // BatchSize's default
		{16, 0, ""},
		{16, 16, ""},
		{6, 3, ""},
	} {
		t.Run(fmt.Sprintf("%d/%d", c.batch, c.micro), func(t *testing.T) {
			cfg := testConfig(1)
			cfg.Batch.Size, cfg.Batch.MicroBatches = c.batch, c.micro
			ld, err := New(src, cfg)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				defer ld.Close()
				eff := ld.Config()
				if m := max(c.micro, 1); eff.Batch.MicroBatches != m || ld.micro != c.batch/m {
					t.Errorf("MicroBatches %d, %d samples a micro-batch", eff.Batch.MicroBatches, ld.micro)
				}
				if s := eff.String(); strings.Contains(s, "micro_batches") != (c.micro > 1) {
					t.Errorf("String: %s", s)
				}
				return
			}
			if err == nil {
				ld.Close()
				t.Fatalf("accepted")
			}
			if !strings.Contains(err.Error(), "pipeline: config: "+c.want) {
				t.Errorf("got %q, want %q", err, c.want)
			}
		})
	}
}

// Bad samples are replaced by the same samples as in whole batches (replacements depend
// on the position, not the batch), and under Fail the epoch ends at the micro-batch that
// holds the first bad sample, naming the same file, after the batch's earlier
// micro-batches.
func TestMicroBatchesBadSamples(t *testing.T) {
	dir := treetest.New(t, 2, 10)
	treetest.Corrupt(t, dir)
	src, err := Dir(dir) // 28 samples, 7 bad
	if err != nil {
		t.Fatal(err)
	}
	config := func(micro int, fail bool) *Config {
		cfg := testConfig(2)
		cfg.Batch.Size, cfg.Batch.MicroBatches, cfg.Bad.Fail, cfg.Bad.MaxFraction = 8, micro, fail, -1
		return cfg
	}
	want, _ := microEpoch(t, newLoader(t, src, config(1, false)), 0, 0)
	got, _ := microEpoch(t, newLoader(t, src, config(4, false)), 0, 0)
	if !bytes.Equal(got.data, want.data) || !slices.Equal(got.indices, want.indices) || !slices.Equal(got.labels, want.labels) {
		t.Fatalf("with bad samples replaced, micro-batches differ from whole batches")
	}

	failRun := func(micro int) (delivered int, err error) {
		for b, e := range newLoader(t, src, config(micro, true)).Epoch(context.Background(), 0) {
			if e != nil {
				return delivered, e
			}
			delivered += b.Len
			b.Release()
		}
		return delivered, nil
	}
	wholeN, wholeErr := failRun(1)
	microN, microErr := failRun(4)
	var we, me *SampleError
	if !errors.As(wholeErr, &we) || !errors.As(microErr, &me) || we.Path != me.Path {
		t.Fatalf("Fail: whole batches end with %v, micro-batches with %v; want the same bad file", wholeErr, microErr)
	}
	if microN < wholeN || microN >= wholeN+8 || microN%2 != 0 {
		t.Errorf("Fail: %d samples delivered in micro-batches of 2, %d in whole batches of 8", microN, wholeN)
	}
}

func TestBatchName(t *testing.T) {
	for _, c := range []struct {
		b    *Batch
		want string
	}{
		{&Batch{Epoch: 1, Number: 3, Micros: 1}, "batch 3 of epoch 1"},
		{&Batch{Epoch: 0, Number: 2, Micro: 1, Micros: 4}, "batch 2 (micro-batch 1 of 4) of epoch 0"},
	} {
		if got := c.b.name(); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}

// TestMicroBatchPrefetchDefault checks the default Prefetch with micro-batches: enough
// micro-batches in flight for 2×Workers samples, never fewer than 2, and an explicit
// Prefetch left alone.
func TestMicroBatchPrefetchDefault(t *testing.T) {
	for _, tc := range []struct{ batch, micro, workers, prefetch, want int }{
		{64, 1, 16, 0, 2},
		{64, 8, 2, 0, 2},
		{64, 8, 16, 0, 4},
		{32, 8, 16, 0, 8},
		{30, 3, 7, 0, 2},
		{32, 8, 16, 3, 3},
	} {
		c := Config{Batch: BatchConfig{Size: tc.batch, MicroBatches: tc.micro}, Tuning: TuningConfig{Workers: tc.workers, Prefetch: tc.prefetch}}
		c.EnsureDefaults()
		if c.Tuning.Prefetch != tc.want {
			t.Errorf("BatchSize %d, MicroBatches %d, Workers %d, Prefetch %d: default Prefetch %d, want %d",
				tc.batch, tc.micro, tc.workers, tc.prefetch, c.Tuning.Prefetch, tc.want)
		}
	}
}
