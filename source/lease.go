package source

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/objstore"
)

// LeaseTTL is how long a conversion's lease in object storage stays live without being
// renewed; a running conversion renews it every LeaseTTL/5. Object stores have no locks
// a killed process gives up, so a lease older than this, by the store's clock, is a
// killed run's.
const LeaseTTL = 5 * time.Minute

// Lease marks, in object storage, a conversion of one part (or of a whole dataset) that
// is running: an object convert.PART.ID.lease under the destination's prefix, renewed
// while it runs and deleted by Close. Each run has its own (the store cannot refuse a
// second run of the part as a local lock does), and ConvertedOrphans looks for orphans
// only while no other run of the part holds a live one: a run's shards and indexes are
// not in another run's staging directory, nor in the part record until it is uploaded,
// and would otherwise be taken for a lost run's.
//
// A lease is live when its last renewal is less than LeaseTTL older than this run's own
// (both times are the store's), unless it names this host, seen since the same boot and
// from the same PID namespace, and a process that no longer runs here (killed; a
// requeued Slurm task resumes at once), or this host before a reboot. Containers sharing
// a host name (host networking) each have their own PID namespace, where the other's pid
// means nothing: a lease from another namespace, or one that does not name its
// namespace, is stale only by its age.
type Lease struct {
	b       *objstore.Bucket
	name    string
	body    []byte
	stop    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	renewed time.Time // the store's time of the last renewal
	err     error     // the last renewal's failure
	// ok is this host's time, taken before its request, of the last renewal that
	// succeeded; lapsed says why another run may have taken this one for a killed one
	// since the lease was taken: it was not renewed for most of LeaseTTL, or was found
	// deleted ("" when neither).
	ok     time.Time
	lapsed string
}

// ErrLeaseLapsed reports that a conversion's lease lapsed while it ran: another run of
// the part may have taken it for a killed run's and deleted its files as orphans.
var ErrLeaseLapsed = errors.New("the conversion's lease lapsed")

// leaseInfo is a lease's contents: who holds it, for messages and for telling a
// killed process's lease on this host.
type leaseInfo struct {
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Staging string    `json:"staging"`
	Started time.Time `json:"started"`
	// Boot and PIDNS tell where PID is meaningful: the host's boot ID and the PID
	// namespace of the process (Linux; empty elsewhere).
	Boot  string `json:"boot,omitempty"`
	PIDNS string `json:"pidns,omitempty"`
}

// held names the leases this process holds, live until Close: another run in this
// process has the same host and pid.
var held sync.Map

// bootID is this host's boot ID, "" where there is none to read.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// pidNamespace names this process's PID namespace, "" where there is none to read.
func pidNamespace() string {
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	return ns
}

// staleHere reports whether li, a lease that is not this process's, is known stale on
// this host: its host rebooted since, or its process, in this PID namespace, exited.
func staleHere(li *leaseInfo, name string) bool {
	host, _ := os.Hostname()
	if li.Host == "" || li.Host != host {
		return false
	}
	boot := bootID()
	if li.Boot != "" && boot != "" && li.Boot != boot {
		return true // written before this host's last boot
	}
	if li.Boot != boot || li.PIDNS != pidNamespace() {
		return false // its pid is another namespace's, or cannot be told
	}
	if li.PID == os.Getpid() {
		_, live := held.Load(name)
		return !live // an earlier process's with this pid, unless this one holds it
	}
	return !processAlive(li.PID)
}

// leasePrefix is the names of part p's leases up to their IDs.
func leasePrefix(p cache.Part) string {
	if p.Whole() {
		return "convert."
	}
	return "convert." + strings.TrimSuffix(p.ShardPrefix(), "-") + "."
}

const leaseExt = ".lease"

// AcquireLease stores a new lease of part p under b for the run converting from the
// staging directory staging, and renews it until Close.
func AcquireLease(ctx context.Context, b *objstore.Bucket, p cache.Part, staging string) (*Lease, error) {
	var id [8]byte
	rand.Read(id[:])
	host, _ := os.Hostname()
	abs, err := filepath.Abs(staging)
	if err != nil {
		abs = staging
	}
	body, err := json.Marshal(leaseInfo{Host: host, PID: os.Getpid(), Staging: abs, Started: time.Now().UTC(), Boot: bootID(), PIDNS: pidNamespace()})
	if err != nil {
		return nil, err
	}
	l := &Lease{b: b, name: leasePrefix(p) + hex.EncodeToString(id[:]) + leaseExt, body: body, stop: make(chan struct{})}
	held.Store(l.name, true)
	if err := l.renew(ctx); err != nil {
		held.Delete(l.name)
		return nil, err
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		t := time.NewTicker(LeaseTTL / 5)
		defer t.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				l.renew(ctx) // a failure is kept for Renewed; the next tick tries again
			}
		}
	}()
	return l, nil
}

// renew stores the lease again and records the store's time of it, and whether it
// lapsed since the last renewal (deleted meanwhile, or renewed too late).
func (l *Lease) renew(ctx context.Context) error {
	start := time.Now()
	l.mu.Lock()
	made := !l.ok.IsZero()
	l.mu.Unlock()
	var gone bool
	if made {
		_, err := l.b.Stat(ctx, l.name)
		gone = errors.Is(err, fs.ErrNotExist)
	}
	err := l.b.Put(ctx, l.name, bytes.NewReader(l.body), int64(len(l.body)))
	var ob objstore.Object
	if err == nil {
		ob, err = l.b.Stat(ctx, l.name)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if gone && l.lapsed == "" {
		l.lapsed = "it was deleted, by a run that took this one for a killed one"
	}
	if err != nil {
		l.err = fmt.Errorf("source: renewing the conversion's lease: %w", err)
		return l.err
	}
	if made && l.lapsed == "" && time.Since(l.ok) > lapseAfter {
		l.lapsed = fmt.Sprintf("it was not renewed for %v (it is stale after %v)", time.Since(l.ok).Round(time.Second), LeaseTTL)
	}
	l.renewed, l.err, l.ok = ob.ModTime, nil, start
	return nil
}

// lapseAfter is how long a lease may go unrenewed, by this host's clock, before this
// run takes it as lapsed: less than LeaseTTL, for the requests' own time.
const lapseAfter = LeaseTTL * 4 / 5

// Check renews the lease now and returns an error wrapping ErrLeaseLapsed, naming the
// lease, when it lapsed at any time since it was taken: another run may then have
// deleted files this run uploaded, as orphans. A run checks before it records what it
// uploaded; nil for a nil Lease.
func (l *Lease) Check(ctx context.Context) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	if !l.ok.IsZero() && l.lapsed == "" && time.Since(l.ok) > lapseAfter {
		l.lapsed = fmt.Sprintf("it was not renewed for %v (it is stale after %v)", time.Since(l.ok).Round(time.Second), LeaseTTL)
	}
	l.mu.Unlock()
	if err := l.renew(ctx); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lapsed != "" {
		return fmt.Errorf("source: %s: %w: %s; another run of the part may have deleted files this one uploaded", l.b.URL(l.name), ErrLeaseLapsed, l.lapsed)
	}
	return nil
}

// Name is the lease's object name under the bucket.
func (l *Lease) Name() string { return l.name }

// Close stops renewing the lease and deletes it.
func (l *Lease) Close(ctx context.Context) error {
	if l == nil {
		return nil
	}
	close(l.stop)
	l.wg.Wait()
	defer held.Delete(l.name)
	if err := l.b.Delete(context.WithoutCancel(ctx), l.name); err != nil {
		return fmt.Errorf("source: deleting the conversion's lease: %w", err)
	}
	return nil
}

// otherLeases describes the live leases of part p under b other than own (nil: this run
// holds none), one "URL (host H, pid P, staging S)" each, and deletes stale ones.
func otherLeases(ctx context.Context, b *objstore.Bucket, p cache.Part, own *Lease) ([]string, error) {
	objs, err := b.List(ctx, leasePrefix(p))
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	var now time.Time
	if own != nil {
		if err := own.renew(ctx); err != nil {
			return nil, err
		}
		own.mu.Lock()
		now = own.renewed
		own.mu.Unlock()
	}
	var live []string
	for _, o := range objs {
		id, ok := strings.CutSuffix(strings.TrimPrefix(o.Name, leasePrefix(p)), leaseExt)
		if !ok || strings.Contains(id, ".") || own != nil && o.Name == own.name {
			continue // another part's (convert.part-… under the whole prefix), or ours
		}
		var li leaseInfo
		if err := readLease(ctx, b, o.Name, &li); errors.Is(err, fs.ErrNotExist) {
			continue // its run ended
		} else if err != nil {
			return nil, err
		}
		stale := !now.IsZero() && !o.ModTime.IsZero() && now.Sub(o.ModTime) > LeaseTTL ||
			staleHere(&li, o.Name)
		if stale {
			b.Delete(ctx, o.Name) // best effort: a killed run's
			continue
		}
		live = append(live, fmt.Sprintf("%s (host %s, pid %d, staging %s, renewed %s)", b.URL(o.Name), li.Host, li.PID, li.Staging, o.ModTime.UTC().Format(time.RFC3339)))
	}
	return live, nil
}

// readLease reads the small lease object name into li; a lease that does not parse
// leaves li zero (its age alone then tells whether it is live).
func readLease(ctx context.Context, b *objstore.Bucket, name string, li *leaseInfo) error {
	tmp, err := os.CreateTemp("", "conveyor-lease-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if _, err := b.DownloadMax(ctx, name, tmp, 64<<10); err != nil {
		if errors.Is(err, objstore.ErrTooLarge) {
			return nil
		}
		return err
	}
	data, err := os.ReadFile(tmp.Name())
	if err == nil {
		json.Unmarshal(data, li)
	}
	return nil
}
