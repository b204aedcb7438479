package cache

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeJSON writes v as dir/name.
func writeJSON(t *testing.T, dir, name string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestInfoBounds: a dataset.json whose counts or sizes no conversion could have written
// is refused at once, naming the file and what is wrong, before anything it names is
// opened; 2e9 parts once made ReadInfo open 2e9 part files.
func TestInfoBounds(t *testing.T) {
	good := ShardManifest{Name: "a.shard", Codec: S2, Records: 10, Bytes: 10_000, IndexBytes: 1_000}
	cases := []struct {
		name string
		edit func(*Info)
		want string
	}{
		{"parts", func(i *Info) { i.Parts = 2_000_000_000 }, "2000000000 parts, more than the 1048576"},
		{"negative samples", func(i *Info) { i.Samples = -1 }, "cannot be negative"},
		{"records", func(i *Info) { i.Shards[0].Records = 1_000_000 }, "1000000 records, more than its 10000 bytes can hold"},
		{"index", func(i *Info) { i.Shards[0].IndexBytes = 1 << 40 }, "an index of 1099511627776 bytes"},
		{"shard bytes", func(i *Info) { i.Shards[0].Bytes = -5 }, "-5 bytes"},
		{"huge shard", func(i *Info) { i.Shards[0].Bytes = 1 << 50 }, "1125899906842624 bytes"},
		{"path", func(i *Info) { i.Shards[0].Name = "../../etc/x.shard" }, "not a shard file"},
		{"not a shard", func(i *Info) { i.Shards[0].Name = "a.idx" }, "not a shard file"},
		{"crc32c", func(i *Info) { i.Shards[0].CRC32C = "xyz" }, `crc32c "xyz" is not 8 hex digits`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			info := Info{Version: InfoVersion, FormatVersion: FormatVersion, Spec: testSpec, Codec: S2, Complete: true, Shards: []ShardManifest{good}}
			tc.edit(&info)
			writeJSON(t, dir, InfoName, &info)
			start := time.Now()
			_, err := ReadInfo(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), filepath.Join(dir, InfoName)) {
				t.Fatalf("ReadInfo: %v; want an error naming %s and saying %q", err, InfoName, tc.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("refused after %v", d)
			}
		})
	}
	// The same checks hold for a part record.
	dir := t.TempDir()
	writeJSON(t, dir, InfoName, &Info{Version: InfoVersion, FormatVersion: FormatVersion, Spec: testSpec, Codec: S2, Parts: 2})
	p := Part{Index: 1, Count: 2}
	bad := good
	bad.Records = 1 << 30
	writeJSON(t, dir, p.PartInfoName(), &Info{Version: InfoVersion, FormatVersion: FormatVersion, Spec: testSpec, Codec: S2, Part: p.String(), Complete: true, Shards: []ShardManifest{bad}})
	if _, err := ReadInfo(dir); err == nil || !strings.Contains(err.Error(), p.PartInfoName()) || !strings.Contains(err.Error(), "records, more than") {
		t.Errorf("a part record with too many records: %v", err)
	}
}

// TestInfoTooLarge: a dataset.json larger than MaxInfoBytes is refused without being
// parsed, naming the file and the limit.
func TestInfoTooLarge(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, InfoName))
	if err != nil {
		t.Fatal(err)
	}
	// The start of a dataset.json, then a hole of zeros past the limit: refused by its
	// size, not parsed.
	head := fmt.Sprintf(`{"version": 2, "format_version": %d, "spec": %q, "codec": "s2", "complete": true`, FormatVersion, testSpec)
	if _, err := f.WriteString(head); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxInfoBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = ReadInfo(dir)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d bytes", MaxInfoBytes)) || !strings.Contains(err.Error(), filepath.Join(dir, InfoName)) {
		t.Fatalf("ReadInfo of %d bytes: %v", MaxInfoBytes+1, err)
	}
}

// TestManyPartsStopped: a dataset of the most parts a conversion can have, none run,
// reads in a few seconds with every part listed as unfinished, and a Stopped that
// explains a few of them, not each.
func TestManyPartsStopped(t *testing.T) {
	dir := t.TempDir()
	writeJSON(t, dir, InfoName, &Info{Version: InfoVersion, FormatVersion: FormatVersion, Spec: testSpec, Codec: S2, Parts: maxParts})
	info, err := ReadInfo(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Unfinished) != maxParts || info.Complete || len(info.Stopped) > 4096 || !strings.Contains(info.Stopped, fmt.Sprintf("and %d more", maxParts-maxReasons)) {
		t.Errorf("%d unfinished, complete %t, Stopped of %d bytes: %.300s", len(info.Unfinished), info.Complete, len(info.Stopped), info.Stopped)
	}
}
