package pipeline

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/conveyor-ml/conveyor/internal/treetest"
)

// On the GPU named by $CONVEYOR_TEST_DEVICE, with a simulated training step of 20 ms, the
// consumer never waits on a copy after the first batch, and the batches equal the host
// loader's (Device.Cast included).
func TestGPUConsumerNeverWaits(t *testing.T) {
	name := os.Getenv("CONVEYOR_TEST_DEVICE")
	if name == "" {
		t.Skip("set CONVEYOR_TEST_DEVICE=cuda:N on a machine with a GPU")
	}
	src, err := Dir(treetest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	want := collect(t, newLoader(t, src, testConfig(2)), context.Background(), 0, 0).data
	for _, convert := range []bool{false, true} {
		cfg := testConfig(2)
		cfg.Device.Name, cfg.Device.Cast = name, convert
		cfg.Logf = t.Logf
		ld := newLoader(t, src, cfg)
		blocked, measured, got := overlapEpoch(t, ld, 20*time.Millisecond, 2*time.Millisecond, true)
		st := ld.Stats()
		t.Logf("convert=%t: %s, %d device bytes, %d batches, %d copy waits (%v), slot wait %v", convert, st.Device.Name, st.Device.Bytes, st.Batches, st.Device.CopyWaits, st.Device.CopyWaitTime, st.Device.SlotWait)
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
