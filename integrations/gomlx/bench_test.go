package gomlx

import (
	"testing"

	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// BenchmarkTensor measures what Yield adds per batch, a 32×224×224×3 float32 batch
// (18.4 MiB), up to the buffer the trainer executes on: with Options.Backend one copy into a
// (pooled) backend buffer; without it a new local tensor, which GoMLX copies again into the
// backend when the step asks for its buffer. Run with -count to interleave the two cases.
func BenchmarkTensor(b *testing.B) {
	b.Run("local", func(b *testing.B) { benchTensor(b, false) })
	b.Run("backend", func(b *testing.B) { benchTensor(b, true) })
}

func benchTensor(b *testing.B, withBackend bool) {
	be, err := simplego.New("")
	if err != nil {
		b.Fatal(err)
	}
	defer be.Finalize()
	const n = 32
	s := shapes.Make(dtypes.Float32, n, 224, 224, 3)
	data := make([]byte, s.Memory())
	for i := range data {
		data[i] = byte(i)
	}
	d := &Dataset{}
	if withBackend {
		d.o.Backend = be
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		t, err := d.tensor(s, data)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := t.Buffer(be, 0); err != nil { // what the trainer's step does
			b.Fatal(err)
		}
		t.MustFinalizeAll()
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "images/s")
}
