package source

import (
	"errors"
	"fmt"

	"github.com/conveyor-ml/conveyor/pipeline"
)

// labelsOf appends sample i's labels to dst, asking for pipeline.MultiLabelSource.
func labelsOf(src pipeline.Source, dst []int, i int) []int {
	if m, ok := src.(pipeline.MultiLabelSource); ok && m.MultiLabel() {
		return m.Labels(dst, i)
	}
	return append(dst, src.Label(i))
}

// isMultiLabel reports whether src says some sample has other than one label.
func isMultiLabel(src pipeline.Source) bool {
	m, ok := src.(pipeline.MultiLabelSource)
	return ok && m.MultiLabel()
}

// checkKind reports a part that is neither a pipeline.FileSource nor a
// pipeline.PixelSource, which no loader could read.
func checkKind(src pipeline.Source) error {
	if src == nil {
		return errors.New("source: nil source")
	}
	_, files := src.(pipeline.FileSource)
	_, pixels := src.(pipeline.PixelSource)
	if !files && !pixels {
		return fmt.Errorf("source: %T has neither files (FileSource: Open) nor stored pixels (PixelSource: Stored); a type wrapping a source must embed one of those interfaces, not Source", src)
	}
	return nil
}
