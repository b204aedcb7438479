package source

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/objstore"
)

// leaseBucket is a local-directory bucket holding the given objects.
func leaseBucket(t *testing.T) *objstore.Bucket {
	t.Helper()
	b, err := objstore.OpenBucket(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func putObject(t *testing.T, b *objstore.Bucket, name string, data []byte) {
	t.Helper()
	if err := b.Put(context.Background(), name, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
}

func orphanNames(o *Orphans) []string {
	var names []string
	for _, ob := range o.Objects {
		names = append(names, ob.Name)
	}
	return names
}

var leasePart = cache.Part{Index: 0, Count: 2}

// A run that starts while another sweeps for orphans, its lease stored after the
// sweep's look at the leases and its first shard before the sweep's listing of the
// prefix, had that shard listed, and deleted, as an orphan.
func TestOrphansRunStartingDuringSweep(t *testing.T) {
	ctx := context.Background()
	b := leaseBucket(t)
	own, err := AcquireLease(ctx, b, leasePart, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close(ctx)
	theirs := "part-0-of-2-00000000000000bb-00000000.shard"
	orphansListed = func() {
		body, _ := json.Marshal(leaseInfo{Host: "another-node", PID: 7, Staging: "/scratch/b"})
		putObject(t, b, "convert.part-0-of-2.00000000000000bb.lease", body)
		putObject(t, b, theirs, []byte("uploaded by a run that just started"))
	}
	defer func() { orphansListed = nil }()
	o, err := ConvertedOrphans(ctx, b, t.TempDir(), leasePart, own)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(orphanNames(o), theirs) {
		t.Fatalf("the starting run's %s was listed as an orphan (live: %v)", theirs, o.Live)
	}
}

// Orphans listed while no other run was live are not deleted once one is: it may use
// them (a run resuming from the lost run's staging directory skips what is stored).
func TestOrphansDeleteRechecksLeases(t *testing.T) {
	ctx := context.Background()
	b := leaseBucket(t)
	own, err := AcquireLease(ctx, b, leasePart, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close(ctx)
	lost := "part-0-of-2-00000000000000cc-00000000.shard"
	putObject(t, b, lost, []byte("a lost run's"))
	o, err := ConvertedOrphans(ctx, b, t.TempDir(), leasePart, own)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(orphanNames(o), lost) {
		t.Fatalf("orphans %v, want %s", orphanNames(o), lost)
	}
	body, _ := json.Marshal(leaseInfo{Host: "another-node", PID: 7, Staging: "/scratch/lost"})
	putObject(t, b, "convert.part-0-of-2.00000000000000cc.lease", body)
	if err := o.Delete(ctx, b); !errors.Is(err, ErrLiveRun) {
		t.Fatalf("Delete with another run live: %v, want ErrLiveRun", err)
	}
	if _, err := b.Stat(ctx, lost); err != nil {
		t.Fatalf("%s deleted while a run that may use it is live: %v", lost, err)
	}
}

// On this host, a lease's pid tells whether its run lives only within the same PID
// namespace and boot: containers sharing the host's name (host networking) each run in
// their own, where the other's pid (often the same, 1) means nothing; and another run in
// this process has this process's pid.
func TestLeaseLiveOnThisHost(t *testing.T) {
	ns, boot := pidNamespace(), bootID()
	if ns == "" || boot == "" {
		t.Skip("no /proc/self/ns/pid or boot ID here: leases are told stale by age only")
	}
	ctx := context.Background()
	host, _ := os.Hostname()
	b := leaseBucket(t)
	own, err := AcquireLease(ctx, b, leasePart, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close(ctx)
	other, err := AcquireLease(ctx, b, leasePart, t.TempDir()) // another run in this process
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	const gone = 1 << 22 // above pid_max's default: no process has it
	for _, li := range []leaseInfo{
		{Host: host, PID: os.Getpid(), Boot: boot, PIDNS: "pid:[1]"}, // another container's, same pid
		{Host: host, PID: gone, Boot: boot, PIDNS: "pid:[1]"},        // another container's
		{Host: host, PID: gone},                                      // namespace not known
	} {
		body, _ := json.Marshal(li)
		putObject(t, b, "convert.part-0-of-2.00000000000000dd.lease", body)
		live, err := otherLeases(ctx, b, leasePart, own)
		if err != nil {
			t.Fatal(err)
		}
		if len(live) != 2 {
			t.Errorf("lease %+v: live %v, want it and the other run in this process", li, live)
		}
	}
	// Known stale: a process of this namespace that exited, and one before a reboot.
	for _, li := range []leaseInfo{
		{Host: host, PID: gone, Boot: boot, PIDNS: ns},
		{Host: host, PID: os.Getpid(), Boot: "a-boot-before", PIDNS: ns},
	} {
		body, _ := json.Marshal(li)
		putObject(t, b, "convert.part-0-of-2.00000000000000dd.lease", body)
		live, err := otherLeases(ctx, b, leasePart, own)
		if err != nil {
			t.Fatal(err)
		}
		if len(live) != 1 {
			t.Errorf("lease %+v: live %v, want only the other run in this process", li, live)
		}
	}
}

// A run whose lease lapsed — deleted by another run that took it for a killed one, or
// not renewed for LeaseTTL — may have had its uploaded shards deleted as orphans: it
// uploaded its record anyway, naming shards no longer stored.
func TestUploadConvertedLeaseLapsed(t *testing.T) {
	ctx := context.Background()
	dir := convertTree(t, 4, 10)
	for _, lapse := range []string{"deleted", "unrenewed"} {
		t.Run(lapse, func(t *testing.T) {
			b := leaseBucket(t)
			lease, err := AcquireLease(ctx, b, cache.Part{}, dir)
			if err != nil {
				t.Fatal(err)
			}
			defer lease.Close(ctx)
			switch lapse {
			case "deleted":
				if err := b.Delete(ctx, lease.Name()); err != nil {
					t.Fatal(err)
				}
			case "unrenewed":
				lease.mu.Lock()
				lease.ok = lease.ok.Add(-LeaseTTL)
				lease.mu.Unlock()
			}
			_, err = UploadConverted(ctx, dir, b, cache.Part{}, lease)
			if !errors.Is(err, ErrLeaseLapsed) {
				t.Fatalf("UploadConverted after the lease lapsed: %v, want ErrLeaseLapsed", err)
			}
			if _, err := b.Stat(ctx, cache.InfoName); err == nil {
				t.Errorf("%s uploaded after the lease lapsed", cache.InfoName)
			}
		})
	}
	// A lease renewed on time lets the records go up.
	b := leaseBucket(t)
	lease, err := AcquireLease(ctx, b, cache.Part{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close(ctx)
	if _, err := UploadConverted(ctx, dir, b, cache.Part{}, lease); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stat(ctx, cache.InfoName); err != nil {
		t.Errorf("%s not uploaded: %v", cache.InfoName, err)
	}
}
