package pipeline

import (
	"fmt"

	"github.com/conveyor-ml/conveyor/augment"
	"github.com/conveyor-ml/conveyor/decode"
)

// Recipes are the standard ImageNet preprocessings, as torchvision's reference scripts
// (and the project's PyTorch peer, bench/peers/torch_dataloader.py) define them:
//
//	train:       RandomResizedCrop(size) → RandomHorizontalFlip(0.5)
//	eval:        Resize(size·256/224) → CenterCrop(size)
//	randaugment: RandomResizedCrop(size) → RandomHorizontalFlip(0.5) → RandAugment(2, 9)
//	             → (normalise, by packing) → RandomErasing(0.25)
//
// For eval the resize happens during decoding (resize first); the Resize op that follows
// only acts on images smaller than the target, which torchvision enlarges. eval sets
// Fidelity to Exact (torchvision's pixels, bit for bit, for evaluating a pretrained
// model); train and randaugment set Fast. EXIF orientation is left as
// Decode.IgnoreOrientation says (applied by default, as ImageOps.exif_transpose does;
// torchvision's stock ImageFolder does not apply it). randaugment is
// the timm/torchvision v2 style training recipe; RandomErasing runs on the packed sample,
// so it erases to 0 in normalised units (the mean colour) with Pack.Normalize, and it
// cannot be combined with Device.Cast (New says so). MixUp/CutMix and label smoothing
// are batch-level and set apart, in Config.Mix.
var Recipes = []string{"train", "eval", "randaugment"}

// ApplyRecipe sets cfg's resize-first policy, augmentation and packed size for the named
// recipe at the given output size; eval also sets Sequential (evaluation visits every
// sample once, in index order, as a DataLoader with shuffle=False). Pack's layout, dtype
// and normalisation are left alone.
func ApplyRecipe(cfg *Config, name string, size int) error {
	if size < 1 {
		return fmt.Errorf("pipeline: recipe size %d < 1", size)
	}
	switch name {
	case "train":
		cfg.Fidelity = Fast
		cfg.Decode.Exact = false
		cfg.Decode.Resize = decode.ResizePolicy{}
		cfg.Augment = augment.Pipeline{
			augment.NewRandomResizedCrop(size, size),
			&augment.RandomHorizontalFlip{P: 0.5},
		}
	case "randaugment":
		cfg.Fidelity = Fast
		cfg.Decode.Exact = false
		cfg.Decode.Resize = decode.ResizePolicy{}
		cfg.Augment = augment.Pipeline{
			augment.NewRandomResizedCrop(size, size),
			&augment.RandomHorizontalFlip{P: 0.5},
			augment.NewRandAugment(2, 9),
			augment.NewRandomErasing(0.25),
		}
	case "eval":
		short := size * 256 / 224
		cfg.Fidelity = Exact
		cfg.Decode.Resize = decode.ResizePolicy{Mode: decode.ResizeShorter, Size: short}
		cfg.Augment = augment.Pipeline{
			&augment.Resize{Size: short},
			&augment.CenterCrop{Width: size, Height: size},
		}
		cfg.Order.Sequential = true
	default:
		return fmt.Errorf("pipeline: unknown recipe %q (have %v)", name, Recipes)
	}
	cfg.Pack.Width, cfg.Pack.Height = size, size
	return nil
}

// decodeBackend names the JPEG decoder in use ("turbo" or "go"), or "cache:CODEC" for a
// converted dataset, whose samples are stored pixels.
func (l *Loader) decodeBackend() string {
	if l.stored != nil {
		return "cache:" + string(l.stored.Options().Codec)
	}
	return l.workers[0].dec.Backend()
}

// webpBackend names the WebP decoder in use ("libwebp" or "go"), or "" for a converted
// dataset.
func (l *Loader) webpBackend() string {
	if l.stored != nil {
		return ""
	}
	return l.workers[0].dec.WebPBackend()
}
