#!/usr/bin/python3
"""conveyor's PyTorch peer: DataLoader + torchvision (PIL with libjpeg-turbo) on an ImageFolder tree,
running the same recipes as conveyor (pipeline/recipe.go) so the two can be compared.

Install once (Debian): apt-get install -y python3-torch python3-torchvision python3-pil
Run:  /usr/bin/python3 bench/peers/torch_dataloader.py DIR [--workers 2] [--batch 64] [--size 224]
          [--epochs 1] [--recipe train|eval|randaugment] [--mixup A] [--cutmix A]
          [--smoothing E] [--prefetch 2] [--step MS] [--max-batches N]
          [--device cpu|cuda|cuda:N|auto [--allow-cpu-fallback]] [--json]
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

--device cuda|cuda:N feeds a GPU, as a training loop would (for comparison with conveyor's GPU
feed): DataLoader(pin_memory=True), and each batch's images and labels go to the device with
.to(device, non_blocking=True). With --step, the consumer then calls torch.cuda.synchronize()
before its sleep, so the step waits for the copy: wait_fraction counts the time inside
next(iterator) plus the time of the copy and the synchronize, and copy_wait_fraction (also
printed) is the copy's part of it. Each epoch ends with a synchronize, so its seconds include
every copy. --device auto picks cuda when torch.cuda.is_available(), else cpu, and says which on
stderr. --device cuda without CUDA exits 2, unless --allow-cpu-fallback, which runs on the CPU
(the default, --device cpu: no pinning, no copy) with a note on stderr. CUDA is initialised
before the first epoch, so its start-up is not in first_batch_s.

--max-batches N ends each epoch after N batches (short timed runs); images/s is over the images
delivered. When an epoch was cut short, the next one's clock starts after iter() has drained the
batches the workers had prefetched for the previous one.

Output, one line per epoch (bench/lib.sh's `last` reads epoch= and images_per_s=):
  torch epoch=0 images=1000 seconds=2.51 images_per_s=398.4 first_batch_s=0.61 [wait_fraction=0.123
      [copy_wait_fraction=0.010]] device=cpu
(copy_wait_fraction with --step on a CUDA device only; device= as cpu or cuda:N, the one used).
first_batch_s (epoch 0 only) is the time from creating the iterator (which starts the workers)
to the first batch. With --json each line is one JSON object with the same fields instead.
"""
import argparse
import json
import math
import random
import sys
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


def pick_device(want, allow_fallback):
    """The torch.device that --device WANT names (cuda made explicit as cuda:N). Exits 2
    when it cannot be used, or falls back to the CPU where that is allowed."""
    if want == 'auto':
        dev = torch.device('cuda') if torch.cuda.is_available() else torch.device('cpu')
        print('torch_dataloader: --device auto: %s' % (
            'CUDA is available, using cuda' if dev.type == 'cuda' else 'CUDA is not available, using cpu'),
            file=sys.stderr, flush=True)
    else:
        try:
            dev = torch.device(want)
        except (RuntimeError, ValueError):
            dev = None
        if dev is None or dev.type not in ('cpu', 'cuda') or (dev.type == 'cpu' and dev.index not in (None, 0)):
            print('torch_dataloader: --device %r: want cpu, cuda, cuda:N or auto' % want, file=sys.stderr)
            sys.exit(2)
        if dev.type == 'cuda' and not torch.cuda.is_available():
            msg = 'torch_dataloader: --device %s: CUDA is not available (torch %s, built with CUDA %s)' % (
                want, torch.__version__, torch.version.cuda or 'none')
            if not allow_fallback:
                print(msg + '; give --allow-cpu-fallback to run on the CPU instead', file=sys.stderr)
                sys.exit(2)
            print(msg + '; --allow-cpu-fallback: running on the CPU', file=sys.stderr, flush=True)
            dev = torch.device('cpu')
    if dev.type == 'cpu':
        return torch.device('cpu')
    n = torch.cuda.device_count()
    idx = torch.cuda.current_device() if dev.index is None else dev.index
    if not 0 <= idx < n:
        print('torch_dataloader: --device %s: no such CUDA device (%d visible)' % (want, n), file=sys.stderr)
        sys.exit(2)
    return torch.device('cuda', idx)


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
    ap.add_argument('--max-batches', type=int, default=None, metavar='N',
                    help='end each epoch after N batches; images/s over the images delivered')
    ap.add_argument('--device', default='cpu', metavar='cpu|cuda|cuda:N|auto',
                    help='where batches go: cpu (default: no copy), cuda[:N] (pinned memory, '
                         'non-blocking copy, synchronize before each --step), auto (cuda if available)')
    ap.add_argument('--allow-cpu-fallback', action='store_true',
                    help='with --device cuda[:N] and no CUDA, run on the CPU instead of exiting 2')
    ap.add_argument('--json', action='store_true', help='print one JSON object per epoch instead of text')
    a = ap.parse_args()
    if a.workers < 0 or a.batch < 1 or a.size < 1 or a.epochs < 0 or a.prefetch < 1:
        ap.error('need --workers >= 0, --batch, --size, --prefetch >= 1 and --epochs >= 0')
    if a.mixup < 0 or a.cutmix < 0 or not 0 <= a.smoothing < 1:
        ap.error('need --mixup, --cutmix >= 0 and --smoothing in [0, 1)')
    if a.max_batches is not None and a.max_batches < 1:
        ap.error('need --max-batches >= 1')

    torch.set_num_threads(1)
    dev = pick_device(a.device, a.allow_cpu_fallback)
    cuda = dev.type == 'cuda'
    if cuda:  # create the context now, not in epoch 0's first batch
        torch.cuda.set_device(dev)
        torch.zeros(1, device=dev)
        torch.cuda.synchronize(dev)
    ds = datasets.ImageFolder(a.dir, transform=recipe(a.recipe, a.size), loader=rgb_loader)
    kw = {}
    if a.workers > 0:  # torch < 2.0 rejects any prefetch_factor other than 2 without workers
        kw = dict(persistent_workers=True, prefetch_factor=a.prefetch)
    if a.smoothing > 0 and a.mixup <= 0 and a.cutmix <= 0:
        ap.error('--smoothing applies to mixed batches here: give --mixup or --cutmix')
    if a.mixup > 0 or a.cutmix > 0:
        kw['collate_fn'] = MixCollate(len(ds.classes), a.mixup, a.cutmix, a.smoothing)
    if cuda:
        kw['pin_memory'] = True
    dl = DataLoader(ds, batch_size=a.batch, shuffle=a.recipe != 'eval', drop_last=False,
                    num_workers=a.workers, **kw)
    step = a.step / 1000.0 if a.step is not None else None
    device = str(dev)

    cut = False  # the previous epoch stopped at --max-batches
    for ep in range(a.epochs):
        n, batches, waited, copied, first = 0, 0, 0.0, 0.0, None
        t0 = time.perf_counter()
        it = iter(dl)
        if cut:  # iter() drained the previous epoch's prefetched batches: not this epoch's work
            t0 = time.perf_counter()
        cut = False
        while True:
            if a.max_batches is not None and batches >= a.max_batches:
                cut = True
                break
            w0 = time.perf_counter()
            try:
                x, y = next(it)
            except StopIteration:
                waited += time.perf_counter() - w0
                break
            w1 = time.perf_counter()
            waited += w1 - w0
            if first is None:
                first = w1 - t0
            batches += 1
            n += x.shape[0]
            if cuda:
                x = x.to(dev, non_blocking=True)
                y = y.to(dev, non_blocking=True)
                if step is not None:
                    torch.cuda.synchronize(dev)  # the step needs the batch on the device
                    copied += time.perf_counter() - w1
            if step:
                time.sleep(step)
        if cuda:
            torch.cuda.synchronize(dev)  # no copy left outstanding in this epoch's seconds
        dt = time.perf_counter() - t0
        r = {'loader': 'torch', 'recipe': a.recipe, 'mixup': a.mixup, 'cutmix': a.cutmix, 'epoch': ep, 'images': n,
             'seconds': round(dt, 4), 'images_per_s': round(n / dt, 1) if dt > 0 else 0.0}
        if ep == 0 and first is not None:
            r['first_batch_s'] = round(first, 4)
        if step is not None:
            r['wait_fraction'] = round((waited + copied) / dt, 4) if dt > 0 else 0.0
            if cuda:
                r['copy_wait_fraction'] = round(copied / dt, 4) if dt > 0 else 0.0
        r['device'] = device
        if a.json:
            r.update(workers=a.workers, batch=a.batch, size=a.size, prefetch=a.prefetch, batches=batches)
            if a.device != device:
                r['device_requested'] = a.device
            if a.max_batches is not None:
                r['max_batches'] = a.max_batches
            if step is not None:
                r['step_ms'] = a.step
                r['wait_s'] = round(waited + copied, 4)
                if cuda:
                    r['copy_wait_s'] = round(copied, 4)
            print(json.dumps(r), flush=True)
            continue
        line = 'torch epoch=%d images=%d seconds=%.2f images_per_s=%.1f' % (ep, n, dt, n / dt if dt > 0 else 0.0)
        if 'first_batch_s' in r:
            line += ' first_batch_s=%.2f' % first
        if step is not None:
            line += ' wait_fraction=%.3f' % ((waited + copied) / dt if dt > 0 else 0.0)
            if cuda:
                line += ' copy_wait_fraction=%.3f' % (copied / dt if dt > 0 else 0.0)
        line += ' device=%s' % device
        print(line, flush=True)


if __name__ == '__main__':
    main()
