package main

import (
	"fmt"

	. "github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/layers/activations"
	"github.com/gomlx/gomlx/pkg/ml/layers/batchnorm"
	"github.com/gomlx/gomlx/pkg/ml/train"
)

// channels are the convolution blocks' widths: each block is a 3×3 convolution, batch
// normalisation, ReLU and a 2×2 max-pool, so a 32-pixel input leaves them at 4×4.
var channels = []int{16, 32, 64}

// cnn returns the model: the convolution blocks on NHWC images (GoMLX's default layout,
// and the one the loaders pack), a global average pool, and a dense layer giving the
// classes' logits.
//
// The pure-Go simplego backend of GoMLX v0.26 runs layers.Convolution and graph.MaxPool
// forward but cannot train them: their gradients need the Reverse and SelectAndScatterMax
// ops, which it lacks (as it lacks the fused batch norm, hence UseBackendInference(false)).
// So the convolution is written as im2col, a Gather of every pixel's 3×3 neighbourhood
// followed by a dense layer over it (the same arithmetic, and what a convolution layer is
// in many CPU libraries), and the pool as a reshape and a ReduceMax. On the XLA backend
// layers.Convolution(ctx, x).Channels(ch).KernelSize(3).PadSame() and
// MaxPool(x).Window(2) are the drop-in equivalents.
func cnn(classes int) train.ModelFn {
	return func(ctx *context.Context, spec any, inputs []*Node) []*Node {
		x := inputs[0] // [N, H, W, 3]
		for i, ch := range channels {
			c := ctx.Inf("block%d", i)
			x = conv3x3(c, x, ch)
			x = batchnorm.New(c, x, -1).UseBackendInference(false).Done()
			x = activations.Relu(x)
			x = maxPool2(x)
		}
		x = ReduceMean(x, 1, 2) // [N, channels[-1]]
		return []*Node{layers.Dense(ctx.In("readout"), x, true, classes)}
	}
}

// conv3x3 is a 3×3 convolution with stride 1 and zero padding ("same") on NHWC, without
// bias (batch norm follows): its kernel is a dense layer's [9·C, ch] weights.
func conv3x3(ctx *context.Context, x *Node, ch int) *Node {
	d := x.Shape().Dimensions
	n, h, w, c := d[0], d[1], d[2], d[3]
	g := x.Graph()
	// Rows of C values, one per pixel, and a row of zeros for the padding.
	rows := Concatenate([]*Node{Reshape(x, n*h*w, c), Zeros(g, shapes.Make(x.DType(), 1, c))}, 0)
	idx := Const(g, neighbourhoods(n, h, w))
	patches := Gather(rows, idx) // [N·H·W·9, C]
	patches = Reshape(patches, n, h, w, 9*c)
	return layers.Dense(ctx.In("conv"), patches, false, ch)
}

// neighbourhoods returns, for every pixel of an [n, h, w] batch and each of its 3×3
// neighbours in row-major order, the neighbour's row in conv3x3's rows, or n·h·w (the zero
// row) outside the image: an int32 tensor of shape [n·h·w·9, 1].
func neighbourhoods(n, h, w int) *tensors.Tensor {
	key := fmt.Sprint(n, h, w)
	if t, ok := indexCache[key]; ok {
		return t
	}
	idx := make([]int32, 0, n*h*w*9)
	zero := int32(n * h * w)
	for b := range n {
		for i := range h {
			for j := range w {
				for di := -1; di <= 1; di++ {
					for dj := -1; dj <= 1; dj++ {
						y, x := i+di, j+dj
						if y < 0 || y >= h || x < 0 || x >= w {
							idx = append(idx, zero)
						} else {
							idx = append(idx, int32((b*h+y)*w+x))
						}
					}
				}
			}
		}
	}
	t := tensors.FromFlatDataAndDimensions(idx, len(idx), 1)
	indexCache[key] = t
	return t
}

// indexCache keeps the index tensors per shape; graphs are built one at a time.
var indexCache = map[string]*tensors.Tensor{}

// maxPool2 is a 2×2 max-pool with stride 2 on NHWC, as a reshape and a ReduceMax; the
// height and width must be even (the command checks -size).
func maxPool2(x *Node) *Node {
	d := x.Shape().Dimensions // [N, H, W, C]
	x = Reshape(x, d[0], d[1]/2, 2, d[2]/2, 2, d[3])
	return ReduceMax(x, 2, 4)
}
