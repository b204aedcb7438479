package pipeline

import (
	"fmt"
	"math/rand/v2"
	"time"

	mix "github.com/conveyor-ml/conveyor/internal/seed"
	"github.com/conveyor-ml/conveyor/mixup"
)

// MultiLabelSource is a Source whose samples may carry several labels, or none (a
// manifest with label lists). The loader asks for it, never for a concrete type, and the
// views (Subset, Concat, Split) pass it through. A source that lacks it has one label per
// sample, Label.
type MultiLabelSource interface {
	Source
	// MultiLabel reports whether some sample has other than exactly one label. When
	// false, Label says everything and batches need no dense targets for it.
	MultiLabel() bool
	// Labels appends sample i's labels, indices into Classes in ascending order, to dst
	// and returns it. Label(i) is the first of them, or -1 when there are none.
	Labels(dst []int, i int) []int
}

// MetadataSource is a Source with per-sample metadata under string keys: a manifest's
// extra CSV columns or JSONL fields. The views pass it through; Batch.Metadata reads it.
type MetadataSource interface {
	Source
	// MetadataKeys lists the keys samples may have values under, in a fixed order.
	MetadataKeys() []string
	// Metadata returns sample i's value under key and whether it has one. The bytes
	// belong to the source: read them, do not change them; they stay valid as long as
	// the source.
	Metadata(i int, key string) ([]byte, bool)
}

// labelsOf appends sample i's labels to dst, asking for MultiLabelSource.
func labelsOf(src Source, dst []int, i int) []int {
	if m, ok := src.(MultiLabelSource); ok && m.MultiLabel() {
		return m.Labels(dst, i)
	}
	return append(dst, src.Label(i))
}

// isMultiLabel reports whether src says some sample has other than one label.
func isMultiLabel(src Source) bool {
	m, ok := src.(MultiLabelSource)
	return ok && m.MultiLabel()
}

// denseClasses is the width of the batches' target rows, 0 when batches carry none:
// mixing or smoothing is configured, or the source is multi-label.
func denseClasses(src Source, c *Config, conv *converting) (int, error) {
	if conv != nil || (!c.Mix.Dense() && !isMultiLabel(src)) {
		return 0, nil
	}
	n := len(src.Classes())
	if n == 0 {
		return 0, fmt.Errorf("pipeline: dense targets (Config.Mix %v, or a multi-label source) need class names, and source %v has none", c.Mix, src)
	}
	return n, nil
}

// fillTarget writes the target row of the sample in slot: off for every class, on for
// each of its labels (smoothing decides off and on).
func (w *worker) fillTarget(r *run, b *Batch, slot, idx int) error {
	l := r.l
	row := b.Targets[slot*l.classes : (slot+1)*l.classes]
	for k := range row {
		row[k] = l.off
	}
	w.labels = labelsOf(l.src, w.labels[:0], idx)
	for _, c := range w.labels {
		if c < 0 || c >= l.classes {
			return &SampleError{Path: l.src.Path(idx), Index: idx, Epoch: r.epoch,
				Err: fmt.Errorf("label %d outside the source's %d classes", c, l.classes)}
		}
		row[c] = l.on
	}
	return nil
}

// mixBatch mixes a complete batch's pixels and targets in place, on the worker that wrote
// its last slot. The draw depends on (Seed, Rank, epoch, batch number, micro-batch) only,
// so the batch is the same for any number of workers and on resume, ranks draw
// differently (as timm's per-rank seeds do), and so does each micro-batch of a batch (as
// timm mixes each loader batch of a gradient-accumulation step on its own).
func (w *worker) mixBatch(r *run, b *Batch) {
	l := r.l
	if !l.cfg.Mix.Mixing() || l.cfg.StopAfter != AllStages || b.failure() != nil {
		return
	}
	t0 := time.Now()
	if w.rng == nil {
		w.rng = rand.New(&w.pcg)
	}
	w.pcg.Seed(mix.Mix(mix.Mix(l.cfg.Order.Seed, uint64(b.Epoch)), mix.Mix(uint64(b.Number), uint64(b.Micro))), mix.Mix(uint64(l.cfg.Order.Rank), 0x6d69787570))
	h, wd := l.cfg.Pack.Height, l.cfg.Pack.Width
	p := l.cfg.Mix.Draw(w.rng, h, wd)
	b.Mix = p
	if p.Unmixed() {
		return // Prob left it as it is: nothing to do, nothing to count
	}
	o := l.packer.Options() // the host's layout and dtype: uint8 NHWC with Device.Cast
	if err := w.mixer.Pixels(b.Data, b.Len, o.Layout, o.DType, h, wd, p); err != nil {
		b.setErr(-1, fmt.Errorf("pipeline: %s: %w", b.name(), err))
		return
	}
	if b.Targets != nil {
		if err := mixup.Targets(b.Targets, b.Len, l.classes, p); err != nil {
			b.setErr(-1, fmt.Errorf("pipeline: %s: %w", b.name(), err))
			return
		}
	}
	l.stats.mix.add(t0, int64(len(b.Data)))
}

// takeTargets returns a target buffer for a batch of n samples, from the loader's
// free-list: one per batch buffer, so it is never empty while a batch buffer is free.
func (l *Loader) takeTargets(n int) []float32 {
	var t []float32
	select {
	case t = <-l.tfree:
	default:
		t = make([]float32, l.micro*l.classes)
	}
	return t[:n*l.classes]
}

// Metadata returns the metadata of the sample in slot under key (see MetadataSource),
// and whether it has any; false when the source has none. The bytes belong to the
// source: read-only, valid as long as the source, and cost nothing per sample until
// asked for. A replaced bad sample shows its replacement's. Call it before Release.
func (b *Batch) Metadata(slot int, key string) ([]byte, bool) {
	if b.meta == nil || slot < 0 || slot >= b.Len {
		return nil, false
	}
	return b.meta.Metadata(int(b.Indices[slot]), key)
}

// MetadataKeys lists the keys the batch's samples may have metadata under; nil when the
// source has none.
func (b *Batch) MetadataKeys() []string {
	if b.meta == nil {
		return nil
	}
	return b.meta.MetadataKeys()
}

// Target returns the target row of the sample in slot: NumClasses values. It panics when
// the batch has no dense targets.
func (b *Batch) Target(slot int) []float32 {
	if b.Targets == nil {
		panic("pipeline: batch has no dense targets (no Config.Mix mixing or smoothing, and a single-label source)")
	}
	return b.Targets[slot*b.NumClasses : (slot+1)*b.NumClasses]
}
