#!/usr/bin/env python3
"""PyTorch's input pipeline on an ImageNet-layout folder, for `dlbench bench input`: torchvision's
ImageFolder with RandomResizedCrop, RandomHorizontalFlip, ToTensor and Normalize (ImageNet's mean
and standard deviation), read by a DataLoader with `--workers` worker processes (shuffled,
drop_last). Times `--batches` batches after `--warmup` and prints one JSON line:
{"images_per_s": ..., "seconds": ..., "images": ...}.

Usage: torch_input.py --root DIR/train --workers N --batch B --size S --batches K [--warmup W]
"""
import sys

from input_peer import arguments, time_batches


def main() -> int:
    a = arguments(__doc__, "torch_input", min_workers=0)
    if a is None:
        return 2
    import torch
    import torchvision.transforms as T
    from torch.utils.data import DataLoader
    from torchvision.datasets import ImageFolder

    torch.manual_seed(a.seed)
    torch.set_num_threads(1)  # each worker one thread, as each of dlbench's loader threads
    transform = T.Compose([T.RandomResizedCrop(a.size), T.RandomHorizontalFlip(), T.ToTensor(),
                           T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    data = ImageFolder(a.root, transform)
    loader = DataLoader(data, batch_size=a.batch, shuffle=True, num_workers=a.workers,
                        drop_last=True, persistent_workers=a.workers > 0)
    if len(loader) < 1:
        print(f"torch_input: error: {a.root} holds fewer than {a.batch} images", file=sys.stderr)
        return 2

    def batches():
        while True:
            yield from loader

    it = batches()
    time_batches(lambda: next(it), a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
