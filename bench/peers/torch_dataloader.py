#!/usr/bin/python3
"""conveyor's PyTorch peer: DataLoader + torchvision (PIL with libjpeg-turbo) on an ImageFolder tree,
running the same recipes as conveyor (pipeline/recipe.go) so the two can be compared.

Install once (Debian): apt-get install -y python3-torch python3-torchvision python3-pil
Run:  /usr/bin/python3 bench/peers/torch_dataloader.py DIR [--workers 2] [--batch 64] [--size 224]
          [--epochs 1] [--recipe train|eval|randaugment] [--mixup A] [--cutmix A]
          [--smoothing E] [--prefetch 2] [--step MS] [--json]
bench/compare.sh runs it interleaved with `conveyor bench` on the same DIR.

Recipes, as conveyor's ApplyRecipe and torchvision's ImageNet reference scripts:
  train: RandomResizedCrop(size, scale=(0.08, 1), ratio=(3/4, 4/3)) -> RandomHorizontalFlip(0.5),
         shuffled every epoch
  eval:  Resize(size*256//224, shorter side) -> CenterCrop(size), in index order (conveyor's
         eval is sequential)
  randaugment: RandomResizedCrop(size) -> RandomHorizontalFlip(0.5) -> RandAugment(num_ops=2,
         magnitude=9) -> ToTensor -> Normalize -> RandomErasing(p=0.25), shuffled every epoch
then ToTensor -> Normalize(ImageNet mean/std): float32 NCHW batches, the last one short
(drop_last=False, as conveyor's default). Resizes are PIL's antialiased bilinear, as conveyor's.
One intra-op thread per process (torch.set_num_threads(1)); persistent workers; images are
opened with PIL and converted to RGB.

--mixup A / --cutmix A mix each batch in the worker that collates it, as timm's Mixup in
'batch' mode: lambda ~ Beta(A, A) per batch, MixUp blends the batch with its reverse, CutMix
pastes a box of the reversed batch (box from lambda, lambda corrected to the pasted area);
with both, one of the two is chosen with probability 0.5 per batch. Targets become float32
[N, classes] soft labels, with --smoothing E label smoothing (off = E/classes, on = 1-E+off).

--step MS simulates a training step: after each batch the consumer sleeps MS milliseconds,
and wait_fraction is the share of the epoch's wall time spent inside next(iterator), i.e.
waiting for the loader (0: the loader keeps up; near 1: the loader is the bottleneck).

Output, one line per epoch (bench/lib.sh's `last` reads epoch= and images_per_s=):
  torch epoch=0 images=1000 seconds=2.51 images_per_s=398.4 first_batch_s=0.61 [wait_fraction=0.123]
first_batch_s (epoch 0 only) is the time from creating the iterator (which starts the workers)
to the first batch. With --json each line is one JSON object with the same fields instead.
"""
import argparse
import json
import math
import random
import time

import torch
from PIL import Image
from torch.utils.data import DataLoader
import torchvision.datasets as datasets
import torchvision.transforms as T

IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]


def rgb_loader(path):
    with open(path, 'rb') as f:
        return Image.open(f).convert('RGB')


def recipe(name, size):
    norm = T.Normalize(IMAGENET_MEAN, IMAGENET_STD)
    if name == 'train':
        return T.Compose([
            T.RandomResizedCrop(size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0),
                                interpolation=T.InterpolationMode.BILINEAR),
            T.RandomHorizontalFlip(0.5),
            T.ToTensor(), norm])
    if name == 'randaugment':
        return T.Compose([
            T.RandomResizedCrop(size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0),
                                interpolation=T.InterpolationMode.BILINEAR),
            T.RandomHorizontalFlip(0.5),
            T.RandAugment(num_ops=2, magnitude=9),
            T.ToTensor(), norm,
            T.RandomErasing(p=0.25)])
    return T.Compose([
        T.Resize(size * 256 // 224, interpolation=T.InterpolationMode.BILINEAR),
        T.CenterCrop(size),
        T.ToTensor(), norm])


class MixCollate:
    """Collates a batch, then mixes it as timm's Mixup(mode='batch') does."""

    def __init__(self, classes, mixup, cutmix, smoothing):
        self.classes, self.mixup, self.cutmix, self.smoothing = classes, mixup, cutmix, smoothing

    def __call__(self, samples):
        x, y = torch.utils.data.default_collate(samples)
        off = self.smoothing / self.classes
        t = torch.full((len(y), self.classes), off)
        t.scatter_(1, y.view(-1, 1), 1.0 - self.smoothing + off)
        use_cutmix = self.cutmix > 0 and (self.mixup <= 0 or random.random() < 0.5)
        alpha = self.cutmix if use_cutmix else self.mixup
        lam = float(torch.distributions.Beta(alpha, alpha).sample())
        if use_cutmix:
            h, w = x.shape[-2:]
            r = math.sqrt(1 - lam)
            ch, cw = int(h * r), int(w * r)
            cy, cx = random.randrange(h), random.randrange(w)
            y0, y1 = max(cy - ch // 2, 0), min(cy + ch // 2, h)
            x0, x1 = max(cx - cw // 2, 0), min(cx + cw // 2, w)
            x[:, :, y0:y1, x0:x1] = x.flip(0)[:, :, y0:y1, x0:x1]
            lam = 1 - (y1 - y0) * (x1 - x0) / float(h * w)
        else:
            xf = x.flip(0).mul_(1 - lam)  # before x changes, as timm's x_flipped
            x.mul_(lam).add_(xf)
        return x, t * lam + t.flip(0) * (1 - lam)


def main():
    ap = argparse.ArgumentParser(description='PyTorch DataLoader throughput with conveyor\'s recipes')
    ap.add_argument('dir', help='ImageFolder tree (class = first-level folder)')
    ap.add_argument('--workers', type=int, default=2, help='DataLoader worker processes')
    ap.add_argument('--batch', type=int, default=64)
    ap.add_argument('--size', type=int, default=224, help='output image side')
    ap.add_argument('--epochs', type=int, default=1)
    ap.add_argument('--recipe', default='train', choices=['train', 'eval', 'randaugment'])
    ap.add_argument('--mixup', type=float, default=0, metavar='A', help='MixUp alpha (0: off)')
    ap.add_argument('--cutmix', type=float, default=0, metavar='A', help='CutMix alpha (0: off)')
    ap.add_argument('--smoothing', type=float, default=0, metavar='E', help='label smoothing of the mixed targets (needs --mixup or --cutmix)')
    ap.add_argument('--prefetch', type=int, default=2, help='DataLoader prefetch_factor (batches per worker)')
    ap.add_argument('--step', type=float, default=None, metavar='MS',
                    help='simulate a training step of MS milliseconds after each batch; report wait_fraction')
    ap.add_argument('--json', action='store_true', help='print one JSON object per epoch instead of text')
    a = ap.parse_args()
    if a.workers < 0 or a.batch < 1 or a.size < 1 or a.epochs < 0 or a.prefetch < 1:
        ap.error('need --workers >= 0, --batch, --size, --prefetch >= 1 and --epochs >= 0')
    if a.mixup < 0 or a.cutmix < 0 or not 0 <= a.smoothing < 1:
        ap.error('need --mixup, --cutmix >= 0 and --smoothing in [0, 1)')

    torch.set_num_threads(1)
    ds = datasets.ImageFolder(a.dir, transform=recipe(a.recipe, a.size), loader=rgb_loader)
    kw = {}
    if a.workers > 0:  # torch < 2.0 rejects any prefetch_factor other than 2 without workers
        kw = dict(persistent_workers=True, prefetch_factor=a.prefetch)
    if a.smoothing > 0 and a.mixup <= 0 and a.cutmix <= 0:
        ap.error('--smoothing applies to mixed batches here: give --mixup or --cutmix')
    if a.mixup > 0 or a.cutmix > 0:
        kw['collate_fn'] = MixCollate(len(ds.classes), a.mixup, a.cutmix, a.smoothing)
    dl = DataLoader(ds, batch_size=a.batch, shuffle=a.recipe != 'eval', drop_last=False,
                    num_workers=a.workers, **kw)
    step = a.step / 1000.0 if a.step is not None else None

    for ep in range(a.epochs):
        n, waited, first = 0, 0.0, None
        t0 = time.perf_counter()
        it = iter(dl)
        while True:
            w0 = time.perf_counter()
            try:
                x, _ = next(it)
            except StopIteration:
                waited += time.perf_counter() - w0
                break
            w1 = time.perf_counter()
            waited += w1 - w0
            if first is None:
                first = w1 - t0
            n += x.shape[0]
            if step:
                time.sleep(step)
        dt = time.perf_counter() - t0
        r = {'loader': 'torch', 'recipe': a.recipe, 'mixup': a.mixup, 'cutmix': a.cutmix, 'epoch': ep, 'images': n,
             'seconds': round(dt, 4), 'images_per_s': round(n / dt, 1) if dt > 0 else 0.0}
        if ep == 0 and first is not None:
            r['first_batch_s'] = round(first, 4)
        if step is not None:
            r['wait_fraction'] = round(waited / dt, 4) if dt > 0 else 0.0
        if a.json:
            r.update(workers=a.workers, batch=a.batch, size=a.size, prefetch=a.prefetch)
            if step is not None:
                r['step_ms'] = a.step
            print(json.dumps(r), flush=True)
            continue
        line = 'torch epoch=%d images=%d seconds=%.2f images_per_s=%.1f' % (ep, n, dt, n / dt if dt > 0 else 0.0)
        if 'first_batch_s' in r:
            line += ' first_batch_s=%.2f' % first
        if step is not None:
            line += ' wait_fraction=%.3f' % (waited / dt if dt > 0 else 0.0)
        print(line, flush=True)


if __name__ == '__main__':
    main()
