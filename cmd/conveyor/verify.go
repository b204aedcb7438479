package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/conveyor-ml/conveyor/cache"
)

func verify(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: conveyor verify DIR

Reads and decodes every record of the cache directory DIR, read-only, checking both
checksums, and lists the damaged ones. Exits 1 when any record is damaged. Bytes after
a shard's last whole record (a writer killed mid-record) are reported, not counted as
damage: readers ignore them.
`)
	}
	pos, err := parseFlags(fs, args, stdout)
	if err != nil {
		return err
	}
	if err := oneDir(pos); err != nil {
		return err
	}
	dir := pos[0]
	c, _, err := openReadOnly(dir, stderr)
	if err != nil {
		return err
	}
	defer c.Close()
	var damaged []string
	rep, err := c.Verify(func(p cache.Problem) {
		path := p.Path
		if path == "" {
			path = "(unknown source)"
		}
		// The error names the record again; say it once.
		msg := strings.TrimPrefix(p.Err.Error(), fmt.Sprintf("cache: %s at %s+%d: ", p.Path, filepath.Base(p.Shard), p.Offset))
		fmt.Fprintf(stdout, "damaged %s+%d %s: %s\n", p.Shard, p.Offset, path, msg)
		damaged = append(damaged, path)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	fmt.Fprintf(stdout, "conveyor verify shards=%d records=%d bytes=%d damaged=%d unreadable_bytes=%d torn_shards=%d\n",
		rep.Shards, rep.Records, rep.Bytes, rep.Damaged, rep.Unreadable, rep.TornShards)
	if rep.TornShards > 0 {
		fmt.Fprintf(stdout, "%d shards end in %d bytes past their last whole record (a writer stopped mid-record); readers ignore them\n",
			rep.TornShards, rep.Unreadable)
	}
	if rep.Damaged > 0 {
		const shown = 3
		names := strings.Join(damaged[:min(len(damaged), shown)], ", ")
		if len(damaged) > shown {
			names += fmt.Sprintf(", ... %d more", len(damaged)-shown)
		}
		return fmt.Errorf("%d of %d records in %s are damaged: %s", rep.Damaged, rep.Records, dir, names)
	}
	return nil
}
