//go:build cuda

package cuinterop_test

import (
	"github.com/conveyor-ml/conveyor/gpu/cuinterop"
	"github.com/conveyor-ml/conveyor/pipeline"
)

// The loader's batches are what DevicePtr takes, without cuinterop importing pipeline.
var _ cuinterop.Batch = (*pipeline.Batch)(nil)
