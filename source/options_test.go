package source

import (
	"strings"
	"testing"
)

// TestOptionsConvention checks every options type of the package: a nil pointer's
// EnsureDefaults holds the defaults, and Validate reports every invalid field at once.
func TestOptionsConvention(t *testing.T) {
	if o := (*FolderOptions)(nil).EnsureDefaults(); o == nil || o.Validate() != nil {
		t.Errorf("FolderOptions defaults: %+v", o)
	}
	if c := (*ConvertedOptions)(nil).EnsureDefaults(); c.Logf == nil || c.PrefetchShards != 2 || c.Validate() != nil {
		t.Errorf("ConvertedOptions defaults: %+v", c)
	}
	w := (*WebDatasetOptions)(nil).EnsureDefaults()
	if w.Concurrency != 8 || w.MaxMetadataBytes != 64<<10 || w.PrefetchShards != 4 || w.Logf == nil || w.Validate() != nil {
		t.Errorf("WebDatasetOptions defaults: %v", w)
	}
	if o := (*OpenOptions)(nil).EnsureDefaults(); o.Converted == nil || o.Converted.PrefetchShards != 2 || o.WebDataset != nil || o.Validate() != nil {
		t.Errorf("OpenOptions defaults: %v", o)
	}

	bad := &OpenOptions{
		WebDataset: &WebDatasetOptions{Concurrency: -1, MaxMetadataBytes: -2, Classes: []string{"a", "a"}},
		Converted:  &ConvertedOptions{PrefetchShards: -3},
	}
	err := bad.EnsureDefaults().Validate()
	if err == nil {
		t.Fatal("Validate accepted negative counts and a repeated class")
	}
	for _, want := range []string{"Concurrency -1", "MaxMetadataBytes -2", `names "a" twice`, "ConvertedOptions.PrefetchShards -3"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v; want it to report %q too", err, want)
		}
	}
}

// TestConstructorsDoNotChangeOptions checks that constructors fill defaults in a copy:
// options a caller shares between calls stay as given.
func TestConstructorsDoNotChangeOptions(t *testing.T) {
	o := &OpenOptions{WebDataset: &WebDatasetOptions{Logf: quiet}}
	if _, err := Open(t.Context(), t.TempDir()+"/absent", o); err == nil {
		t.Fatal("Open of a missing folder succeeded")
	}
	if o.Converted != nil || o.WebDataset.Concurrency != 0 {
		t.Errorf("Open changed its options: %v", o)
	}
}
