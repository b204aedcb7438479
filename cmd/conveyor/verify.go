package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/internal/units"
	"github.com/conveyor-ml/conveyor/objstore"
)

// verifyUsage is verify's help, before the flags; %s is the converted dataset's info
// file.
const verifyUsage = `usage: conveyor verify DIR|SHARDS|TREE|MANIFEST [flags]

Checks the cache directory DIR, read-only: every shard's header and index, and every
record, read and decoded, against both its checksums. For a converted dataset it also
checks the directory against the manifest in DIR/%s: every shard it lists present,
of the recorded size and record count, its header and index unchanged.

Prints one line per problem: a damaged record, a damaged shard header or index, a
missing, truncated or changed shard. Exits 1 when there is any, or when the
dataset's conversion did not complete. Bytes after a shard's last whole record (a
writer killed mid-record) are reported, not counted as damage: readers ignore them.
So is a damaged record that a later conversion run stored again, which the dataset
no longer uses.

DIR may be an s3:// or http(s):// prefix holding a converted dataset: its shards
are fetched one by one into a shard cache in the system's temporary directory
(at most 16 GiB at once), checked, and evicted when space is needed.

DIR may also be WebDataset shards: .tar files, a pattern ('DIR/train-*.tar'), or a
brace list, local or remote ('s3://bucket/train-{000000..000099}.tar'). Every sample
is checked: its image member read and decoded whole, its label parsed, its members
grouped by key. Prints one line per bad sample, naming the shard and the sample's
key, and exits 1 when there is any. A folder holding .tar files (and no folders) is
read as its shards.

DIR may also be an ImageFolder tree (DIR/CLASS/*.jpg) or a manifest (.csv, .jsonl):
every file is read and decoded whole. Prints one line per bad file, its path and why,
then a summary line, and exits 1 when there is any.
`

func verify(args []string, stdout, stderr io.Writer) (err error) {
	ctx, stop := commandContext()
	defer stop()
	defer func() { err = interrupted(ctx, err) }()
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), verifyUsage, cache.InfoName)
		fmt.Fprintf(fs.Output(), "\nflags:\n")
		fs.PrintDefaults()
	}
	allowEmpty := fs.Bool(allowEmptyFlag, false, allowEmptyUsage)
	pos, err := parseFlags(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) > 1 && shardArgs(pos) {
		return verifyShards(ctx, pos, stdout, stderr)
	}
	if err := oneDir(pos); err != nil {
		return err
	}
	ds, err := openRemoteIndex(ctx, pos[0])
	if err != nil {
		return err
	}
	defer ds.close()
	if ds.remote == nil && shardArgs(pos) {
		return verifyShards(ctx, pos, stdout, stderr)
	}
	if ds.remote == nil {
		if err := checkLocal(pos[0]); err != nil {
			return err
		}
		if !cacheDir(pos[0]) {
			return verifySource(ctx, pos[0], *allowEmpty, stdout)
		}
		signalsKill()
	}
	name, dir := pos[0], ds.dir // errors call the dataset by the name the user gave
	if ds.remote != nil {
		stdout = renaming(stdout, dir, name)
		defer func() { fmt.Fprint(stderr, ds.fetched()) }()
	}
	c, info, err := openReadOnly(ds, stderr)
	if err != nil {
		return err
	}
	defer c.Close()
	pl := &problemList{ctx: ctx, stdout: stdout, reported: map[string]bool{}}
	rep, err := c.VerifyDataset(info, pl.add)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	orphaned, err := ds.orphans(ctx, info, pl.reported)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	for _, o := range orphaned {
		fmt.Fprintf(stdout, "orphan %s: %s does not list it (left by an earlier or lost run); readers ignore it: delete it%s\n", o, cache.InfoName, orphanAdvice(name, o))
	}
	fmt.Fprintf(stdout, "conveyor verify shards=%d records=%d bytes=%d damaged=%d unreadable_bytes=%d torn_shards=%d damaged_shards=%d lost_records=%d superseded=%d orphans=%d\n",
		rep.Shards, rep.Records, rep.Bytes, rep.Damaged-rep.Superseded, rep.Unreadable, rep.TornShards, rep.DamagedShards, rep.Lost, rep.Superseded, len(orphaned))
	if rep.TornShards > 0 {
		fmt.Fprintf(stdout, "%s end in %s past their last whole record (a writer stopped mid-record); readers ignore them\n",
			plural(rep.TornShards, "shard"), units.Bytes(rep.Unreadable))
	}
	incomplete := ""
	if info != nil {
		if incomplete = datasetState(dir, info); incomplete != "" {
			fmt.Fprintf(stdout, "incomplete: %s\n", incomplete)
		} else if !info.Manifested() {
			fmt.Fprintf(stdout, "no manifest: %s predates them (version 1), so shards were checked by themselves only; conveyor convert SRC %s again records one\n", cache.InfoName, dir)
		}
	}
	if err := verdict(name, c, info, &rep, pl.damaged); err != nil {
		return err
	}
	if incomplete != "" {
		return fmt.Errorf("%s is incomplete: %s", name, incomplete)
	}
	return nil
}

// problemList prints the problems a dataset's verification finds, one line each, and
// keeps what the verdict names.
type problemList struct {
	ctx      context.Context
	stdout   io.Writer
	damaged  []string        // the damaged records and shards, as the verdict names them
	reported map[string]bool // shards with a problem of their own, named already
}

// add prints one problem.
func (pl *problemList) add(p cache.Problem) {
	if pl.ctx.Err() != nil {
		return // the shard cache closed: every read fails, saying so
	}
	if p.Kind == cache.KindMissing && errors.Is(p.Err, objstore.ErrChanged) {
		// Fetched, but not the shard the manifest recorded (the shard cache
		// expects its size and CRC-32C, as training's does): refused whole.
		p.Kind = cache.KindChanged
	}
	if p.Kind != cache.KindRecord {
		pl.reported[filepath.Base(p.Shard)] = true
		fmt.Fprintf(pl.stdout, "%s %s: %v%s\n", problemKind(p.Kind), p.File(), p.Err, ofPart(p.File()))
		pl.damaged = append(pl.damaged, fmt.Sprintf("%s %s%s", p.Kind, filepath.Base(p.File()), ofPart(p.File())))
		return
	}
	path := p.Path
	if path == "" {
		path = "(unknown source)"
	}
	// The error names the record again; say it once.
	msg := strings.TrimPrefix(p.Err.Error(), fmt.Sprintf("cache: %s at %s+%d: ", p.Path, filepath.Base(p.Shard), p.Offset))
	if p.Superseded {
		fmt.Fprintf(pl.stdout, "superseded %s+%d %s: %s (stored again later; the dataset reads the later copy)\n", p.Shard, p.Offset, path, msg)
		return
	}
	fmt.Fprintf(pl.stdout, "damaged %s+%d %s: %s%s\n", p.Shard, p.Offset, path, msg, ofPart(p.Shard))
	pl.damaged = append(pl.damaged, path+ofPart(p.Shard))
}

// verdict is the error verify ends with when the dataset name is damaged: records,
// shards, or samples its manifest counts that no shard holds; it names up to three of
// the damaged.
func verdict(name string, c *cache.Cache, info *cache.Info, rep *cache.VerifyReport, damaged []string) error {
	var parts []string
	if n := rep.Damaged - rep.Superseded; n > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d records are damaged", n, rep.Records))
	}
	if rep.DamagedShards > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d shards are damaged or missing (%d records lost)", rep.DamagedShards, max(rep.Shards, rep.DamagedShards), rep.Lost))
	}
	if info.Manifested() && rep.DamagedShards == 0 {
		// No shard is damaged, yet the dataset may hold fewer samples than it counts
		// (opening it would refuse it): say so rather than pass it.
		if n := len(c.Records(info.Spec)); n < info.Stored {
			parts = append(parts, fmt.Sprintf("%d of the %d samples %s counts are in none of its shards", info.Stored-n, info.Stored, cache.InfoName))
		}
	}
	if len(parts) == 0 {
		return nil
	}
	const shown = 3
	names := strings.Join(damaged[:min(len(damaged), shown)], ", ")
	if len(damaged) > shown {
		names += fmt.Sprintf(", ... %d more", len(damaged)-shown)
	}
	if names == "" {
		return fmt.Errorf("%s in %s", strings.Join(parts, "; "), name)
	}
	return fmt.Errorf("%s in %s: %s", strings.Join(parts, "; "), name, names)
}

// maxVerifyBytes is the largest image member verify reads (the loader refuses one larger
// than its read budget).
const maxVerifyBytes = 1 << 30

// ofPart is " (part i/N)" for a file written by a part of a conversion in parts, so
// that whoever reruns it knows which: "" otherwise.
func ofPart(file string) string {
	if p, ok := cache.ShardPart(file); ok {
		return " (part " + p.String() + ")"
	}
	return ""
}

// problemKind is how verify and inspect name a kind of damage to a shard.
func problemKind(k cache.Kind) string {
	switch k {
	case cache.KindHeader, cache.KindIndex:
		return "damaged " + string(k)
	}
	return string(k)
}

// orphans names the shard and index files of the converted dataset whose Info is info
// that its manifest does not list, though the conversion (or the part whose name they
// carry) has finished: files of an earlier or lost run, which readers ignore. Files of
// an unfinished part or conversion are not orphans (it may still record them), nor are
// shards in reported, whose problems are named already. A local dataset's directory is
// read; an s3:// prefix is listed (a web server lists nothing: none are found there).
// Local verify read and counted such shards before, and S3 verify fetched only what the
// manifest names, so both now name them alike, and neither fails for them.
func (d *remoteDataset) orphans(ctx context.Context, info *cache.Info, reported map[string]bool) ([]string, error) {
	if !info.Manifested() {
		return nil, nil
	}
	var names []string
	switch {
	case d.remote == nil:
		ents, err := os.ReadDir(d.dir)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			names = append(names, e.Name())
		}
	case strings.HasPrefix(d.url, "s3://"):
		objs, err := d.bucket.List(ctx, "")
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			names = append(names, o.Name)
		}
	}
	listed := map[string]bool{}
	for _, m := range info.Shards {
		listed[strings.TrimSuffix(m.Name, ".shard")] = true
	}
	unfinished := map[string]bool{}
	for _, p := range info.Unfinished {
		unfinished[p] = true
	}
	var out []string
	for _, n := range names {
		base, ok := strings.CutSuffix(n, ".shard")
		if !ok {
			base, ok = strings.CutSuffix(n, ".idx")
		}
		if !ok || strings.ContainsAny(n, `/\`) || strings.HasPrefix(n, ".") || listed[base] || reported[base+".shard"] {
			continue
		}
		if p, parted := cache.ShardPart(n); parted && p.Count == info.Parts {
			if unfinished[p.String()] {
				continue
			}
		} else if !info.Complete {
			continue
		}
		out = append(out, d.name(filepath.Join(d.dir, n)))
	}
	return out, nil
}

// orphanAdvice says how to delete the orphan file o of the dataset at name: a convert of
// the part that left it, for a dataset converted in parts (its shards' names say which).
func orphanAdvice(name, o string) string {
	if !strings.HasPrefix(name, "s3://") {
		return ""
	}
	part := ""
	if p, ok := cache.ShardPart(path.Base(o)); ok {
		part = " --part " + p.String()
	}
	return " (conveyor convert SRC " + name + part + " --delete-orphans deletes it)"
}
