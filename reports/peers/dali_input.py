#!/usr/bin/env python3
"""NVIDIA DALI's input pipeline on an ImageNet-layout folder, for `dlbench bench input`: DALI's
file reader (the class folders' sorted names as labels, shuffled), its decoder with a random crop
of torchvision's RandomResizedCrop rule (area 0.08-1, aspect ratio 3/4-4/3, ten tries; DALI
decodes only the crop's region), a resize with antialiasing, a random horizontal flip and
normalisation by ImageNet's mean and standard deviation to float CHW: the pipeline of DALI's
ResNet-50 example. `--device=cpu` (the default): all of it on `--workers` CPU threads
(device_id None: no GPU). `--device=gpu`: DALI's mixed decoder (nvJPEG, on the GPU's JPEG engines
where it has them) and the rest on GPU 0, as the example trains. Times `--batches` batches after
`--warmup` (the GPU's outputs ready) and prints one JSON line: {"images_per_s": ...,
"seconds": ..., "images": ...}.

Usage: dali_input.py --root DIR/train --workers N --batch B --size S --batches K [--warmup W]
                     [--device=cpu|gpu]
"""
import sys

from input_peer import arguments, time_batches


def main() -> int:
    a = arguments(__doc__, "dali_input", min_workers=1)
    if a is None:
        return 2
    from nvidia.dali import fn, pipeline_def, types

    mean = [0.485 * 255, 0.456 * 255, 0.406 * 255]
    std = [0.229 * 255, 0.224 * 255, 0.225 * 255]

    gpu = a.device == "gpu"

    @pipeline_def(batch_size=a.batch, num_threads=a.workers, device_id=0 if gpu else None,
                  seed=a.seed, prefetch_queue_depth=2)
    def pipeline():
        jpegs, labels = fn.readers.file(file_root=a.root, random_shuffle=True, name="reader")
        images = fn.decoders.image_random_crop(jpegs, device="mixed" if gpu else "cpu",
                                               output_type=types.RGB,
                                               random_area=[0.08, 1.0],
                                               random_aspect_ratio=[3 / 4, 4 / 3],
                                               num_attempts=10)
        images = fn.resize(images, resize_x=a.size, resize_y=a.size, antialias=True)
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                          mean=mean, std=std,
                                          mirror=fn.random.coin_flip(probability=0.5))
        return images, labels

    pipe = pipeline()
    pipe.build()
    time_batches(pipe.run, a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
