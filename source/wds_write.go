package source

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/conveyor-ml/conveyor/pipeline"
)

// WriteWebDataset writes samples [from, to) of src to w as one WebDataset tar shard, in
// index order: per sample, its image under the key (its path without the extension,
// dots in the base name replaced by '_', as a WebDataset key ends at the first dot), its
// labels (.cls with one label; .json {"label": [...]} for a multi-label source), and its
// metadata, each key an extension. A file whose key an earlier sample of the shard has
// (photo.jpg then photo.png) takes its extension into its key (photo_png). An image that
// is not a JPEG, PNG or WebP by name, a sample that cannot be read and keys that still
// repeat are errors naming the sample. It is
// how tests and benchmarks make shards from an ImageFolder; split a dataset into shards
// by calling it once per range.
func WriteWebDataset(w io.Writer, src pipeline.FileSource, from, to int) error {
	if from < 0 || to > src.Len() || from >= to {
		return fmt.Errorf("source: webdataset: samples [%d, %d) outside the source's %d", from, to, src.Len())
	}
	tw := tar.NewWriter(w)
	put := func(name string, data []byte) error {
		return tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0), Format: tar.FormatPAX})
	}
	meta, _ := src.(pipeline.MetadataSource)
	seen := map[string]bool{}
	var labels []int
	for i := from; i < to; i++ {
		p := src.Path(i)
		ext := strings.ToLower(strings.TrimPrefix(path.Ext(p), "."))
		if !slices.Contains(wdsImageExts, ext) {
			return fmt.Errorf("source: webdataset: %s: not a .jpg, .jpeg, .png or .webp image, which WebDataset readers take", p)
		}
		dir, base := path.Split(strings.TrimSuffix(p, path.Ext(p)))
		key := dir + strings.ReplaceAll(base, ".", "_")
		if seen[key] {
			// The same name as .jpg and .png, say: the later one's key names its
			// extension (photo.png's is photo_png), as a key may not repeat in a shard.
			key += "_" + ext
		}
		if seen[key] {
			return fmt.Errorf("source: webdataset: %s: key %s repeats an earlier sample's", p, key)
		}
		seen[key] = true
		f, err := src.Open(i)
		if err != nil {
			return fmt.Errorf("source: webdataset: %s: %w", p, err)
		}
		data, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("source: webdataset: %s: %w", p, err)
		}
		members := []wdsMeta{{ext, data}}
		if isMultiLabel(src) {
			labels = labelsOf(src, labels[:0], i)
			js, _ := json.Marshal(map[string][]int{"label": labels})
			members = append(members, wdsMeta{"json", js})
		} else {
			members = append(members, wdsMeta{"cls", strconv.AppendInt(nil, int64(src.Label(i)), 10)})
		}
		if meta != nil {
			for _, k := range meta.MetadataKeys() {
				if v, ok := meta.Metadata(i, k); ok && k != "" && !strings.Contains(k, "/") && k != ext && k != members[1].key {
					members = append(members, wdsMeta{strings.ToLower(k), v})
				}
			}
		}
		for _, m := range members {
			if err := put(key+"."+m.key, m.data); err != nil {
				return fmt.Errorf("source: webdataset: %s: %w", p, err)
			}
			if _, err := tw.Write(m.data); err != nil {
				return fmt.Errorf("source: webdataset: %s: %w", p, err)
			}
		}
	}
	return tw.Close()
}
