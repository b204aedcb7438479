package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/conveyor-ml/conveyor/cache"
	"github.com/conveyor-ml/conveyor/internal/units"
	"github.com/conveyor-ml/conveyor/objstore"
)

// inspectResult is what inspect --json prints. The dataset fields are set when the
// directory holds a converted dataset (dataset.json); Specs lists every spec either way.
type inspectResult struct {
	Dir           string `json:"dir"`
	FormatVersion int    `json:"format_version"`
	Dataset       bool   `json:"dataset"` // the directory holds dataset.json

	Spec     string `json:"spec,omitempty"`
	Codec    string `json:"codec,omitempty"`
	Source   string `json:"source,omitempty"`
	Samples  int    `json:"samples"` // records stored under Spec; without dataset.json, under any spec
	Listed   int    `json:"listed"`  // source files the conversion listed
	Bad      int    `json:"bad"`
	Complete bool   `json:"complete"`
	// Incomplete says why the conversion did not complete: still running, stopped (and
	// why), or killed.
	Incomplete string `json:"incomplete,omitempty"`
	// Parts is the number of parts the dataset was converted in (conveyor convert
	// --part), and Unfinished those of them that have not completed, "i/N".
	Parts      int      `json:"parts,omitempty"`
	Unfinished []string `json:"unfinished_parts,omitempty"`
	// Manifest: dataset.json records the dataset's shards, which Problems compares the
	// directory with (shard headers and indexes; records are not read).
	Manifest bool         `json:"manifest"`
	Problems []string     `json:"problems,omitempty"`
	Updated  *time.Time   `json:"updated,omitempty"`
	Classes  []classCount `json:"classes,omitempty"`

	Bytes          int64      `json:"bytes"` // the directory's shards and indexes
	BytesPerSample float64    `json:"bytes_per_sample"`
	Sizes          *sizeRange `json:"sizes,omitempty"` // of the samples' stored images
	Shards         int        `json:"shards"`
	Records        int        `json:"records"` // indexed records, all specs
	Specs          []specInfo `json:"specs"`   // the dataset's spec first, then by name
}

type classCount struct {
	Name    string `json:"name"`
	Samples int    `json:"samples"`
}

// sizeRange is the smallest, median and largest stored image by pixel count.
type sizeRange struct {
	Min    string `json:"min"`
	Median string `json:"median"`
	Max    string `json:"max"`
}

type specInfo struct {
	Spec           string     `json:"spec"`
	Records        int        `json:"records"` // one per source path
	Codecs         []string   `json:"codecs"`
	Bytes          int64      `json:"bytes"`  // the records' bytes in their shards
	Labels         int        `json:"labels"` // distinct labels
	BytesPerSample float64    `json:"bytes_per_sample"`
	Sizes          *sizeRange `json:"sizes,omitempty"`
}

func inspect(args []string, stdout, stderr io.Writer) (err error) {
	ctx, stop := commandContext()
	defer stop()
	defer func() { err = interrupted(ctx, err) }()
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: conveyor inspect DIR [--json] [--prune]\n       conveyor inspect SHARDS [--json]\n       conveyor inspect TREE|MANIFEST [--json]\n\nDescribes the cache directory DIR, a converted dataset or a loader's cache, read-only\n(--prune deletes the shards of a converted dataset's other specs: what conversions with\nother flags left); an ImageFolder tree or a manifest (.csv, .jsonl): samples, classes\nand file formats; or WebDataset shards: a folder of .tar files, or a local or remote\nURL ('DIR/train-{000..099}.tar', s3://bucket/train-{000000..001023}.tar,\ns3://bucket/prefix/): shards, samples, classes,\nbad samples and each shard's sample count (WebDatasetOptions.ShardSamples). --json's\noutput is a shard index (WebDataset's wids format, plus class names): kept beside the\nshards as NAME.json, conveyor bench NAME.json (or source.Open) opens them\nwithout reading every shard first; conveyor bench --shard-index reads it too.\nDIR may be an s3:// or http(s):// prefix holding a converted dataset: only its\ndataset.json, part records and shard indexes are fetched, not its shards.\n\nflags:\n")
		fs.PrintDefaults()
	}
	jsonOut := fs.Bool("json", false, "print one JSON object instead of text")
	allowEmpty := fs.Bool(allowEmptyFlag, false, allowEmptyUsage)
	prune := fs.Bool("prune", false, "delete the shards and indexes of a local converted dataset that hold records of other specs than the dataset's (left by conversions with other flags), saying what it deleted")
	pos, err := parseFlags(fs, args, stdout)
	if err != nil {
		return err
	}
	if err := oneDir(pos); err != nil {
		return err
	}
	if *prune && objstore.IsRemote(pos[0]) {
		return usagef("--prune deletes from a local converted dataset; %s is in object storage", pos[0])
	}
	ds, err := openRemoteIndex(ctx, pos[0])
	if err != nil {
		return err
	}
	defer ds.close()
	if ds.remote == nil && shardArgs([]string{ds.dir}) {
		if *prune {
			return usagef("--prune applies to a converted dataset, not to WebDataset shards")
		}
		return inspectShards(ctx, pos[0], *jsonOut, stdout, stderr)
	}
	if ds.remote == nil {
		if err := checkLocal(ds.dir); err != nil {
			return err
		}
		if !cacheDir(ds.dir) {
			if *prune {
				return usagef("--prune applies to a converted dataset (a DIR holding %s); %s holds none", cache.InfoName, pos[0])
			}
			return inspectSource(ctx, pos[0], *allowEmpty, *jsonOut, stdout, stderr)
		}
		signalsKill()
	}
	c, info, err := openReadOnly(ds, stderr)
	if err != nil {
		return err
	}
	defer c.Close()
	if *prune {
		return pruneSpecs(c, info, stdout)
	}
	// Checking the dataset lists the records of remote shards, so describe them after
	// it; a local dataset is described as opened, before the check lists the records of
	// shards that cannot be read.
	var res *inspectResult
	if ds.remote == nil {
		res = describe(c, info)
	}
	var problems []string
	if info != nil {
		for _, p := range c.CheckDataset(info) {
			problems = append(problems, fmt.Sprintf("%s %s: %v", problemKind(p.Kind), ds.name(p.File()), p.Err))
		}
	}
	if res == nil {
		res = describe(c, info)
	}
	if info != nil {
		res.Incomplete = datasetState(ds.dir, info)
		res.Manifest = info.Manifested()
		res.Problems = problems
	}
	if ds.remote != nil {
		// The shards stay in the store: their bytes are the ones the manifest records.
		res.Dir = strings.TrimSuffix(ds.url, "/")
		if info != nil && info.Manifested() {
			res.Bytes = 0
			for _, m := range info.Shards {
				res.Bytes += m.Bytes + m.IndexBytes
			}
		}
		fmt.Fprint(stderr, ds.fetched())
	}
	if *jsonOut {
		return json.NewEncoder(stdout).Encode(res)
	}
	printInspect(stdout, res)
	return nil
}

// openReadOnly opens the cache in ds.dir read-only, with its dataset Info when it has
// one, its shards read through ds.remote when the dataset is in object storage. A
// directory with neither shards nor dataset.json is an error: most likely a wrong path.
func openReadOnly(ds *remoteDataset, stderr io.Writer) (*cache.Cache, *cache.Info, error) {
	dir := ds.dir
	if err := checkDir(dir); err != nil {
		return nil, nil, err
	}
	info, err := cache.ReadInfo(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, err
	}
	opts := &cache.Options{ReadOnly: true, Logf: func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }}
	if info != nil {
		opts.Codec = info.Codec
	}
	if ds.remote != nil {
		opts.Remote = ds.remote
	}
	c, err := cache.Open(dir, opts)
	if err != nil {
		return nil, nil, err
	}
	if info == nil && c.Stats().Shards == 0 {
		c.Close()
		return nil, nil, fmt.Errorf("%s: not a cache directory (no shards and no %s); conveyor convert SRC DIR makes one", dir, cache.InfoName)
	}
	return c, info, nil
}

// datasetState says why the conversion of the dataset in dir, which info describes, did
// not complete; "" when it did.
func datasetState(dir string, info *cache.Info) string {
	switch {
	case info.Complete:
		return ""
	case info.Stopped != "":
		return "its conversion " + info.Stopped
	}
	if holder, running := cache.Converting(dir); running {
		return fmt.Sprintf("its conversion is still running (%s)", holder)
	}
	return "its conversion did not finish (it was killed, or the disk filled before it could record why)"
}

// oneDir checks that the positional arguments are one DIR.
func oneDir(pos []string) error {
	switch len(pos) {
	case 0:
		return usagef("missing DIR")
	case 1:
		return nil
	}
	return usagef("want one DIR, got %d arguments: %q", len(pos), pos)
}

func describe(c *cache.Cache, info *cache.Info) *inspectResult {
	st := c.Stats()
	res := &inspectResult{Dir: c.Dir(), FormatVersion: cache.FormatVersion, Bytes: st.Bytes, Shards: st.Shards, Records: st.Records}
	specs := slices.Sorted(maps.Keys(c.Specs()))
	if info != nil {
		res.Dataset = true
		res.FormatVersion = info.FormatVersion
		res.Spec, res.Codec, res.Source = info.Spec, string(info.Codec), info.Source
		res.Listed, res.Bad, res.Complete = info.Samples, info.Bad, info.Complete
		res.Parts, res.Unfinished = info.Parts, info.Unfinished
		if !info.Updated.IsZero() {
			res.Updated = &info.Updated
		}
		// The dataset's spec first, even when none of its records is indexed.
		specs = slices.DeleteFunc(specs, func(s string) bool { return s == info.Spec })
		specs = slices.Insert(specs, 0, info.Spec)
	}
	for i, spec := range specs {
		refs := c.Records(spec)
		si := specInfo{Spec: spec, Records: len(refs), Codecs: []string{}, Sizes: sizesOf(refs)}
		labels := map[int32]int{}
		for _, r := range refs {
			si.Bytes += int64(r.Bytes)
			labels[r.Label]++
			if !slices.Contains(si.Codecs, string(r.Codec)) {
				si.Codecs = append(si.Codecs, string(r.Codec))
			}
		}
		si.Labels = len(labels)
		if len(refs) > 0 {
			si.BytesPerSample = float64(si.Bytes) / float64(len(refs))
		}
		res.Specs = append(res.Specs, si)
		if info != nil && i == 0 {
			res.Samples, res.BytesPerSample, res.Sizes = si.Records, si.BytesPerSample, si.Sizes
			for label, name := range info.Classes {
				res.Classes = append(res.Classes, classCount{Name: name, Samples: labels[int32(label)]})
			}
		}
	}
	if info == nil {
		res.Samples = st.Records
		if st.Records > 0 {
			res.BytesPerSample = float64(st.Bytes) / float64(st.Records)
		}
	}
	return res
}

// sizesOf returns the smallest, median and largest of refs' images by pixel count.
func sizesOf(refs []cache.Ref) *sizeRange {
	if len(refs) == 0 {
		return nil
	}
	type wh struct{ w, h uint32 }
	s := make([]wh, len(refs))
	for i, r := range refs {
		s[i] = wh{r.Width, r.Height}
	}
	slices.SortFunc(s, func(a, b wh) int {
		if d := cmp.Compare(uint64(a.w)*uint64(a.h), uint64(b.w)*uint64(b.h)); d != 0 {
			return d
		}
		return cmp.Compare(a.w, b.w)
	})
	f := func(x wh) string { return fmt.Sprintf("%dx%d", x.w, x.h) }
	return &sizeRange{Min: f(s[0]), Median: f(s[len(s)/2]), Max: f(s[len(s)-1])}
}

// classesShown is how many class names inspect prints.
const classesShown = 8

func printInspect(w io.Writer, r *inspectResult) {
	line := func(k, format string, a ...any) { fmt.Fprintf(w, "%-13s %s\n", k, fmt.Sprintf(format, a...)) }
	line("directory", "%s", r.Dir)
	line("format", "%d", r.FormatVersion)
	sizes := func(s *sizeRange) string {
		if s == nil {
			return "none"
		}
		return fmt.Sprintf("min %s, median %s, max %s", s.Min, s.Median, s.Max)
	}
	if r.Dataset {
		line("spec", "%s", r.Spec)
		line("codec", "%s", r.Codec)
		if r.Source != "" {
			line("source", "%s", r.Source)
		}
		line("samples", "%d stored of %d listed, %d bad", r.Samples, r.Listed, r.Bad)
		switch {
		case r.Parts > 0 && len(r.Unfinished) > 0:
			const shown = 16 // --json lists every one
			names := strings.Join(r.Unfinished[:min(len(r.Unfinished), shown)], ", ")
			if n := len(r.Unfinished) - shown; n > 0 {
				names += fmt.Sprintf(", ... %d more", n)
			}
			line("parts", "%d, %d unfinished: %s", r.Parts, len(r.Unfinished), names)
		case r.Parts > 0:
			line("parts", "%d, all complete", r.Parts)
		}
		if r.Incomplete != "" {
			line("complete", "false: %s", r.Incomplete)
		} else {
			line("complete", "%t", r.Complete)
		}
		switch {
		case !r.Manifest && r.Complete:
			line("integrity", "unchecked: %s predates manifests (version 1); conveyor convert again records one", cache.InfoName)
		case !r.Manifest:
			line("integrity", "unchecked until the conversion ends and records its manifest")
		case len(r.Problems) == 0:
			line("integrity", "shards and indexes as recorded (records not read: conveyor verify reads them)")
		default:
			line("integrity", "%d problems (conveyor verify lists them all):", len(r.Problems))
			for _, p := range r.Problems {
				fmt.Fprintf(w, "  %s\n", p)
			}
		}
		line("classes", "%s", classSummary(r.Classes))
		all := ""
		if len(r.Specs) > 1 {
			all = ", all specs"
		}
		line("bytes", "%s on disk (%d%s), %s per sample", units.Bytes(r.Bytes), r.Bytes, all, units.Bytes(int64(r.BytesPerSample+0.5)))
		line("image sizes", "%s", sizes(r.Sizes))
		line("shards", "%d", r.Shards)
		if r.Updated != nil {
			line("updated", "%s", r.Updated.Local().Format(time.DateTime))
		}
		if len(r.Specs) > 1 {
			fmt.Fprintf(w, "other specs (not part of the dataset; conveyor inspect %s --prune deletes them):\n", r.Dir)
			for _, s := range r.Specs[1:] {
				fmt.Fprintf(w, "  %d records, codec %s, %s: %s\n", s.Records, strings.Join(s.Codecs, ","), units.Bytes(s.Bytes), s.Spec)
			}
		}
		return
	}
	line("dataset", "none (no %s: a loader's cache)", cache.InfoName)
	line("records", "%d", r.Records)
	line("bytes", "%s on disk (%d), %s per record", units.Bytes(r.Bytes), r.Bytes, units.Bytes(int64(r.BytesPerSample+0.5)))
	line("shards", "%d", r.Shards)
	for _, s := range r.Specs {
		fmt.Fprintf(w, "spec %s\n", s.Spec)
		fmt.Fprintf(w, "  %d records, codec %s, %d labels, %s per record, image sizes %s\n",
			s.Records, strings.Join(s.Codecs, ","), s.Labels, units.Bytes(int64(s.BytesPerSample+0.5)), sizes(s.Sizes))
	}
}

// classSummary prints the class count, the range of samples per class and the first
// few classes: "10 (98-100 samples each): class00 (100), class01 (99), ...".
func classSummary(cs []classCount) string {
	if len(cs) == 0 {
		return "none listed"
	}
	lo, hi := cs[0].Samples, cs[0].Samples
	for _, c := range cs {
		lo, hi = min(lo, c.Samples), max(hi, c.Samples)
	}
	var b strings.Builder
	if lo == hi {
		fmt.Fprintf(&b, "%d (%d samples each): ", len(cs), lo)
	} else {
		fmt.Fprintf(&b, "%d (%d-%d samples each): ", len(cs), lo, hi)
	}
	for i, c := range cs[:min(len(cs), classesShown)] {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (%d)", c.Name, c.Samples)
	}
	if len(cs) > classesShown {
		fmt.Fprintf(&b, ", ... %d more", len(cs)-classesShown)
	}
	return b.String()
}

// notCacheHint follows an error opening a local folder that inspect or verify read as
// a source, since they read converted datasets too.
const notCacheHint = "; nor is it a converted dataset (no " + cache.InfoName + "; conveyor convert SRC DIR makes one)"
