package pipeline

import (
	"context"
	"os"
	"testing"
	"time"
)

// On the GPU named by $CONVEYOR_TEST_DEVICE, with a simulated training step of 20 ms, the
// consumer never waits on a copy after the first batch, and the batches equal the host
// loader's (DeviceConvert included).
func TestGPUConsumerNeverWaits(t *testing.T) {
	name := os.Getenv("CONVEYOR_TEST_DEVICE")
	if name == "" {
		t.Skip("set CONVEYOR_TEST_DEVICE=cuda:N on a machine with a GPU")
	}
	src, err := Dir(sharedTree(t))
	if err != nil {
		t.Fatal(err)
	}
	want := collect(t, newLoader(t, src, testConfig(2)), context.Background(), 0, 0).data
	for _, convert := range []bool{false, true} {
		cfg := testConfig(2)
		cfg.Device, cfg.DeviceConvert = name, convert
		cfg.Logf = t.Logf
		ld := newLoader(t, src, cfg)
		blocked, measured := 0, 0
		var inOrder int64 // when the batches so far were all complete, Unix ns
		var got []byte
		for b, err := range ld.Epoch(context.Background(), 0) {
			if err != nil {
				t.Fatal(err)
			}
			// A batch completed just now (input-bound) cannot have been copied yet.
			// Batches are copied in order, so a batch is ready to copy when it and all
			// before it are complete.
			inOrder = max(inOrder, b.completed.Load())
			inputBound := b.Number < 2 || time.Since(time.Unix(0, inOrder)) < 2*time.Millisecond
			before := ld.Stats().CopyWaits
			if err := b.Wait(); err != nil {
				t.Fatal(err)
			}
			if !inputBound {
				measured++
				if ld.Stats().CopyWaits > before {
					blocked++
				}
			}
			time.Sleep(20 * time.Millisecond)
			buf := make([]byte, b.DeviceBytes())
			if err := b.slot.Read(buf); err != nil {
				t.Fatal(err)
			}
			got = append(got, buf...)
			b.Release()
		}
		st := ld.Stats()
		t.Logf("convert=%t: %s, %d device bytes, %d batches, %d copy waits (%v), slot wait %v", convert, st.Device, st.DeviceBytes, st.Batches, st.CopyWaits, st.CopyWaitTime, st.SlotWait)
		if measured < 3 {
			t.Errorf("convert=%t: only %d of %d batches were complete a copy's time before the consumer asked", convert, measured, st.Batches)
		}
		if blocked > 0 {
			t.Errorf("convert=%t: the consumer waited on %d of the %d copies of batches that were ready in time", convert, blocked, measured)
		}
		if string(got) != string(want) {
			t.Errorf("convert=%t: device batches differ from the host loader's", convert)
		}
	}
}
