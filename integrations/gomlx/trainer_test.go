package gomlx_test

import (
	"testing"

	"github.com/gomlx/gomlx/backends"
	. "github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/train"
	"github.com/gomlx/gomlx/pkg/ml/train/losses"
	"github.com/gomlx/gomlx/pkg/ml/train/optimizers"
)

// trainLinear trains a linear classifier on ds for epochs and returns the last loss.
func trainLinear(t *testing.T, be backends.Backend, ds train.Dataset, epochs int) float64 {
	t.Helper()
	ctx := context.New()
	model := func(ctx *context.Context, spec any, inputs []*Node) []*Node {
		x := inputs[0]
		x = Reshape(x, x.Shape().Dimensions[0], -1)
		return []*Node{layers.Dense(ctx.In("dense"), x, true, classes)}
	}
	tr := train.NewTrainer(be, ctx, model, losses.SparseCategoricalCrossEntropyLogits,
		optimizers.Adam().LearningRate(0.01).Done(), nil, nil)
	loop := train.NewLoop(tr)
	metrics, err := loop.RunEpochs(ds, epochs)
	if err != nil {
		t.Fatal(err)
	}
	return float64(tensors.ToScalar[float32](metrics[0]))
}
