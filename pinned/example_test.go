package pinned_test

import (
	"context"
	"fmt"

	"github.com/conveyor-ml/conveyor/pinned"
)

func ExampleNew() {
	// Room for 4 batches of 1 MiB; the pool maps (and tries to lock) all of it now.
	pool, err := pinned.New(&pinned.Options{BufferSize: 1 << 20, Budget: 4 << 20})
	if err != nil {
		panic(err)
	}
	defer pool.Close()

	buf, err := pool.Get(context.Background()) // blocks while all 4 are out
	if err != nil {
		panic(err)
	}
	batch := buf.Bytes() // pack samples here, hand it to the GPU copy...
	fmt.Println(len(batch))
	buf.Release() // ...and give it back once the copy has finished

	st := pool.Stats()
	fmt.Println(st.Buffers, st.PeakInUse, st.InUse, st.PeakBytesInUse <= st.Budget)
	// Output:
	// 1048576
	// 4 1 0 true
}
