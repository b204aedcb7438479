// Package pipeline is conveyor's loader: it streams a dataset through concurrent stages —
// list → read → decode (resize first) → augment → pack — into pinned batch buffers, in a
// deterministic order, under one memory budget.
//
// A training loop looks like
//
//	ld, err := pipeline.New(src, cfg)
//	...
//	defer ld.Close()
//	for b, err := range ld.Epoch(ctx, epoch) {
//		if err != nil { ... }
//		train(b.Float32(), b.Labels)
//		b.Release()
//	}
//
// Order and pixels depend only on the configuration, the seed and the epoch — never on the
// number of workers or on timing. Only this package starts goroutines; every one of them is
// joined before Epoch's iterator returns and before Close returns.
package pipeline
