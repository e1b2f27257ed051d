#!/usr/bin/env python3
"""The PyTorch peer: torchvision's model trained with the settings of one dlbench point, timed as
dlbench times, written as a record in dlbench's result schema (suites/schema/result.schema.json)
with config.system = "pytorch". The harness runs it beside dlbench for a suite's `system` axis
(dlbench --suite=NAME --systems=dlbench,pytorch), through the same launcher, so that the ratio of
the two throughputs comes from one run on one machine.

What is the same as dlbench:
- the model (torchvision's, which dlbench's reference models match name for name), the batch per
  rank, the image size, the classes, the seed, dropout, and SGD with dlbench's lr, momentum and
  weight decay (every parameter decays, as in dlbench);
- synthetic data: one batch drawn at the start (normal images, uniform labels) and reused;
- the timing (docs/metrics.md, "Timed phase"): `warmup` untimed steps, then `steps` timed ones,
  and more at the measured pace until the phase lasts `min_time` seconds (every rank as many as
  the slowest asks); the first phase's leading steps above the later steps' fence left out as
  warm-up, and the phase repeated `repetitions` times, each with its throughput. On the GPU each
  step is marked by a CUDA event on the stream, with the device synchronised before the first
  mark and after the last; on the CPU, where every op is synchronous, by the host clock.
  Throughput is every rank's images over the slowest rank's timed seconds, and each step's time
  is the slowest rank's;
- precision: fp32 strict (no TF32), tf32 (PyTorch's allow_tf32 switches), and fp16 and bf16 as
  PyTorch's own automatic mixed precision: torch.autocast, channels_last on the GPU, and a
  GradScaler with its default settings for fp16, on the GPU. Gradients cross the wire in 16 bits,
  as dlbench's do (DDP's compression hooks). On the CPU, fp32 and bf16 (torch.autocast's bf16
  products through oneDNN, as dlbench's CPU backend multiplies bf16 natively where the CPU can,
  metrics.arithmetic); not fp16, which dlbench's CPU backend computes in f32;
- data parallel: torch.distributed, gloo on the CPU and nccl on the GPU, one process per rank as
  dlbench's launcher starts them (mpirun, srun or one local process). overlap=backward is
  DistributedDataParallel with bucket_cap_mb = bucket_mb (all-reduce hidden behind backward);
  overlap=none all-reduces the gradients in buckets of bucket_mb after backward. PyTorch has no
  overlap with the next forward, so overlap=forward on several ranks is unsupported (on one rank
  there is nothing to overlap, and it runs as none).

A setting that PyTorch cannot follow (a memory budget, a workspace limit, a named CPU convolution
algorithm, a fixed fp16 loss scale, the digits data set, dlbench's own digits CNN) makes the
record `unsupported`, with the reason, and the sweep goes on.

usage: pytorch_train.py --point FILE
       pytorch_train.py --model M --batch B --image-size S [--precision P] [--backend cpu|cuda]
                        [--steps N] [--warmup N]     (one point by hand: the record to stdout)
The point file is the harness's: {"resolved": {config key: value}, "record": PATH}. A point file
may also name "init" (weights as safetensors, torchvision's names) and "batch_file" (images and
labels as safetensors) in its resolved config: the parity test's way of training the very batch
dlbench trains.

read_point checks a point file as dlbench checks a suite's point, before anything runs: a regular
file of at most MAX_POINT_BYTES, strict JSON (no NaN, Infinity or number too large for a double),
and its resolved config valid against the config definition of suites/schema/suite.schema.json
(the option table's types, values and ranges, exported by dlbench) with integers of 64 bits, a
null value meaning "not set". What breaks a rule is one line on stderr naming the file and the
key, exit 2, and no record. read_point imports no PyTorch (tests/fuzz/peer_point fuzzes it).
Records are written as strict JSON: a metric that is not finite makes the point failed, naming it.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import platform
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TORCHVISION_MODELS = ("alexnet", "vgg16", "resnet18", "resnet50")
SUITE_SCHEMA = os.path.join(ROOT, "suites", "schema", "suite.schema.json")
MAX_POINT_BYTES = 2**20  # the harness's point files are about 2 KB
POINT_INPUTS = ("init", "batch_file")  # files a point may name (the parity test's), not config
INT64_MAX = 2**63 - 1  # integers are 64-bit signed, but the seed: 0 to 2^64 - 1
UINT64_KEYS = {"seed": 2**64 - 1}  # (suites/harness/core/option_table.cpp: kInteger, kUnsigned)


class Unsupported(Exception):
    """A setting this peer cannot reproduce: the point's record says why."""


class PointError(Exception):
    """A point file the peer cannot train from: one line naming the file and the key (exit 2)."""


# ---- the point file ---------------------------------------------------------------------------

def read_regular_file(path: str, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes. Stats, then opens without blocking
    (a FIFO does not hang the peer) and checks what it opened; PointError otherwise."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise PointError(f"{path}: not a regular file")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise PointError(f"{path}: cannot read: {e.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise PointError(f"{path}: not a regular file")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise PointError(f"{path}: larger than {limit} bytes: not a point file")
    return data


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:20]} is too large for a number")
    return value


def parse_strict_json(data: bytes, path: str):
    """JSON as dlbench reads it: UTF-8, no NaN or Infinity, finite numbers."""
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_refuse_constant,
                          parse_float=_finite_float)
    except UnicodeDecodeError as e:
        raise PointError(f"{path}: not UTF-8 (byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise PointError(f"{path}: not valid JSON: {e.msg} at line {e.lineno} column "
                         f"{e.colno}") from None
    except (ValueError, RecursionError) as e:  # a constant, 1e999, 5000 digits, deep nesting
        raise PointError(f"{path}: not valid JSON: {str(e)[:80]}") from None


def config_definition() -> tuple[dict, dict]:
    """(a schema of one point's config, each key's definition) from suite.schema.json."""
    with open(SUITE_SCHEMA) as f:
        suite = json.load(f)
    return {"$defs": suite["$defs"], "$ref": "#/$defs/config"}, suite["$defs"]["key"]


def dlbench_defaults() -> dict:
    """dlbench's default of every key that has one, as suite.schema.json exports it from
    dlbench's option table (the one definition of them; option_table_test checks the export):
    what a key that a config leaves unset means. A key without one (num_classes, dropout, ...)
    means the model's own."""
    _, keys = config_definition()
    return {key: d["default"] for key, d in keys.items() if "default" in d}


def _shown(value) -> str:
    return json.dumps(value)[:60]


def check_integers(values: dict, keys: dict, where: str) -> None:
    """What dlbench asks of an integer and the schema does not: a JSON integer (not 2.0) of 64
    bits."""
    for key, v in values.items():
        if keys.get(key, {}).get("type") != "integer":
            continue
        if not isinstance(v, int):
            raise PointError(f"{where}.{key}: expected an integer, got {_shown(v)}")
        if v > UINT64_KEYS.get(key, INT64_MAX):
            raise PointError(f"{where}.{key}: {_shown(v)} is too large")


def check_config(c: dict, where: str) -> None:
    """The resolved config against suite.schema.json's config; PointError naming the key.
    A null value is a key not set (the harness writes every key); "data": "batch-file" goes with
    a batch_file."""
    try:
        import jsonschema
    except ImportError:
        raise PointError(f"{where}: cannot be checked: jsonschema is not installed for "
                         f"{sys.executable}") from None
    for key in POINT_INPUTS:
        if c.get(key) is not None and (not isinstance(c[key], str) or not c[key]):
            raise PointError(f"{where}.{key}: expected the path of a file, got {_shown(c[key])}")
    values = {k: v for k, v in c.items() if v is not None and k not in POINT_INPUTS}
    if c.get("batch_file") and values.get("data") == "batch-file":
        del values["data"]
    schema, keys = config_definition()
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(values),
                    key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        e = errors[0]
        at = "".join(f".{p}" for p in e.absolute_path)
        raise PointError(f"{where}{at}: {e.message[:160]}")
    check_integers(values, keys, where)
    for key in ("model", "batch"):
        if key not in values:
            raise PointError(f"{where}.{key}: required")
    if "image_size" not in values and not c.get("batch_file"):
        raise PointError(f"{where}.image_size: required (or a batch_file)")


def read_point(path: str) -> tuple[dict, str]:
    """(the config to train: the harness's resolved config, in which every key is set or null;
    the path of the record) from a point file, checked whole. PointError names the file and the
    key."""
    point = parse_strict_json(read_regular_file(path, MAX_POINT_BYTES), path)
    if not isinstance(point, dict):
        raise PointError(f"{path}: a point file must be a JSON object")
    record = point.get("record")
    if not isinstance(record, str) or not record:
        raise PointError(f"{path}: record: expected the path to write the record to")
    resolved = point.get("resolved")
    if not isinstance(resolved, dict):
        raise PointError(f"{path}: resolved: expected an object (the point's config)")
    check_config(resolved, f"{path}: resolved")
    given = {k: v for k, v in resolved.items() if v is not None}  # null: not set
    return dict(dlbench_defaults(), **given), record


# ---- where this rank is ----------------------------------------------------------------------

def rank_and_size(ranks: int) -> tuple[int, int, int]:
    """(rank, ranks, local rank) of a point of `ranks` ranks. One rank runs alone, whatever the
    environment says (inside an sbatch job SLURM_NTASKS names the job's size, not this point's);
    several read their place from the launcher's environment (Open MPI, MPICH, Slurm), whose size
    must be the point's."""
    if ranks == 1:
        return 0, 1, 0
    for r, n, local in (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                         "OMPI_COMM_WORLD_LOCAL_RANK"),
                        ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
                        ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID")):
        if r in os.environ and n in os.environ:
            if int(os.environ[n]) != ranks:
                raise Unsupported(f"ranks={ranks}, but the launcher started {os.environ[n]} "
                                  f"processes ({n})")
            return int(os.environ[r]), ranks, int(os.environ.get(local, "0"))
    raise Unsupported(f"ranks={ranks} needs the processes started by mpirun or srun "
                      "(no launcher's rank variables are set)")


def launcher_rank() -> int:
    """This process's rank as the launcher numbered it, 0 when no launcher did."""
    for var in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return 0


def master_address() -> str:
    if os.environ.get("MASTER_ADDR"):
        return os.environ["MASTER_ADDR"]
    nodes = os.environ.get("SLURM_STEP_NODELIST") or os.environ.get("SLURM_JOB_NODELIST")
    if nodes:
        out = subprocess.run(["scontrol", "show", "hostnames", nodes], capture_output=True,
                             text=True, check=True).stdout.split()
        if out:
            return out[0]
    raise Unsupported("ranks on several hosts need MASTER_ADDR set to rank 0's host")


# ---- settings ---------------------------------------------------------------------------------

def check_supported(c: dict, torch) -> None:
    """Raises Unsupported for what PyTorch cannot do as dlbench's config asks."""
    if c["model"] not in TORCHVISION_MODELS:
        raise Unsupported(f"model {c['model']} is dlbench's own; torchvision has no such model")
    if c["data"] != "synthetic" and not c.get("batch_file"):
        raise Unsupported(f"data={c['data']}: the peer trains on synthetic data only")
    cuda = c["backend"] == "cuda"
    if cuda and not torch.cuda.is_available():
        raise Unsupported("backend=cuda, but this PyTorch sees no GPU "
                          f"(torch {torch.__version__}, built for CUDA {torch.version.cuda})")
    p = c["precision"]
    if not cuda and p not in ("fp32", "bf16"):
        # dlbench's CPU backend stores fp16 tensors and computes in f32; not the same work as
        # any PyTorch CPU mode, so no ratio.
        raise Unsupported(f"precision={p} on the CPU: dlbench's CPU backend stores 16 bits and "
                          "computes fp16 in f32; the peer compares fp32 and bf16 there")
    if c.get("overlap") == "forward" and int(c["ranks"]) > 1:
        raise Unsupported("overlap=forward: PyTorch's DistributedDataParallel overlaps "
                          "all-reduce with backward only")
    if c.get("memory_plan", "reuse") != "reuse":
        # PyTorch's caching allocator hands a freed tensor's block to the next request: bytes
        # reused as lifetimes end, as dlbench's reuse plan (the default) places them.
        raise Unsupported(f"memory_plan={c['memory_plan']}: PyTorch's caching allocator reuses a "
                          "tensor's bytes once it is freed, as memory_plan=reuse does; it has no "
                          "other plan to follow")
    if c.get("loss_scale") is not None:
        raise Unsupported("a fixed loss scale: PyTorch's GradScaler always adapts its scale")
    for key in ("memory_budget", "workspace_limit"):
        if c.get(key) is not None:
            raise Unsupported(f"{key}={c[key]}: PyTorch has no such limit to set")
    if c.get("conv_math") == "strict":
        raise Unsupported("conv_math=strict: PyTorch lets 16-bit convolutions take cuDNN's engines "
                          "that accumulate in 16 bits (conv_math=fast); it has no switch to bar "
                          "them")
    if c["conv_algo"] not in ("heuristic", "autotune"):
        raise Unsupported(f"conv_algo={c['conv_algo']} names one of dlbench's CPU algorithms")
    if c.get("cuda_graph"):
        raise Unsupported("cuda_graph=true: the peer trains eagerly; it does not capture its "
                          "step with torch.cuda.graph")
    if c.get("memory_guard"):
        raise Unsupported("memory_guard=true: the red zones are dlbench's allocator's; PyTorch's "
                          "has none")
    if c.get("sync", "sync") != "sync":
        raise Unsupported(f"sync={c['sync']}: the peer averages each step's own gradients "
                          "(DistributedDataParallel) only")
    if c.get("straggler"):
        raise Unsupported(f"straggler={c['straggler']}: the injected straggler is dlbench's own")
    if (c.get("lr_scaling", "none") != "none" or c.get("lr_warmup", "0") not in ("0", 0) or
            c.get("lr_schedule", "constant") != "constant"):
        raise Unsupported("a learning-rate rule (lr_scaling, lr_warmup, lr_schedule): the peer "
                          "trains at a constant rate")


def threads_for_this_rank() -> int:
    """Every core this process may use, or OMP_NUM_THREADS where the launcher shared them out
    between ranks (as it does for dlbench). PyTorch's own default can be fewer."""
    if os.environ.get("OMP_NUM_THREADS", "").isdigit():
        return max(int(os.environ["OMP_NUM_THREADS"]), 1)
    return len(os.sched_getaffinity(0))


def read_safetensors(path: str, torch) -> dict:
    """safetensors (the layout dlbench writes and reads): an 8-byte little-endian header length,
    a JSON header, then the raw bytes."""
    dtypes = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
              "I64": torch.int64, "I32": torch.int32}
    if not stat.S_ISREG(os.stat(path).st_mode):  # /dev/zero would be read whole
        raise ValueError(f"{path}: not a regular file")
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        raw = bytearray(data[8 + n + b:8 + n + e])
        out[name] = torch.frombuffer(raw, dtype=dtypes[t["dtype"]]).reshape(t["shape"]).clone()
    return out


# ---- the run ----------------------------------------------------------------------------------

class Run:
    def __init__(self, c: dict, torch, torchvision):
        self.c, self.torch = c, torch
        self.rank, self.ranks, self.local_rank = rank_and_size(int(c["ranks"]))
        self.cuda = c["backend"] == "cuda"
        if self.cuda:
            torch.cuda.set_device(self.local_rank % torch.cuda.device_count())
        else:
            torch.set_num_threads(threads_for_this_rank())
        self.device = torch.device("cuda" if self.cuda else "cpu")
        tf32 = c["precision"] == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cudnn.benchmark = c.get("conv_algo") == "autotune"
        if self.ranks > 1:
            import torch.distributed as dist
            os.environ["MASTER_ADDR"] = master_address()
            if "MASTER_PORT" not in os.environ:
                raise Unsupported("several ranks need MASTER_PORT (the harness sets it)")
            dist.init_process_group(
                "nccl" if self.cuda else "gloo", rank=self.rank, world_size=self.ranks,
                timeout=datetime.timedelta(seconds=float(c["comm_timeout"])))
        torch.manual_seed(int(c["seed"]))
        # num_classes unset (a point by hand): the model's own, as dlbench's is.
        classes = {} if c.get("num_classes") is None else {"num_classes": int(c["num_classes"])}
        model = getattr(torchvision.models, c["model"])(weights=None, **classes)
        self.classes = [m for m in model.modules() if isinstance(m, torch.nn.Linear)][-1].out_features
        if c.get("init"):
            model.load_state_dict(read_safetensors(c["init"], torch), strict=True)
        if c.get("dropout") is not None:
            for m in model.modules():
                if isinstance(m, torch.nn.Dropout):
                    m.p = float(c["dropout"])
        self.half = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(c["precision"])
        # AMP as PyTorch documents it for convolutional networks on the GPU: channels_last.
        self.channels_last = self.half is not None and self.cuda
        model = model.to(self.device).train()
        if self.channels_last:
            model = model.to(memory_format=torch.channels_last)
        self.params = sum(p.numel() for p in model.parameters())
        self.opt = torch.optim.SGD(model.parameters(), lr=float(c["lr"]),
                                   momentum=float(c["momentum"]),
                                   weight_decay=float(c["weight_decay"]))
        self.scaler = torch.cuda.amp.GradScaler(enabled=c["precision"] == "fp16")
        self.bucket_bytes = float(c["bucket_mb"]) * 2**20
        if self.ranks > 1 and c["overlap"] == "backward":
            from torch.nn.parallel import DistributedDataParallel
            # DDP sizes its buckets in the parameters' f32 bytes; under a 16-bit compression
            # hook the wire carries half, so twice bucket_mb puts bucket_mb on the wire.
            wire_factor = 2 if self.half is not None else 1
            model = DistributedDataParallel(
                model, device_ids=[torch.cuda.current_device()] if self.cuda else None,
                bucket_cap_mb=wire_factor * float(c["bucket_mb"]))
            if self.half is not None:
                # dlbench keeps 16-bit gradients and all-reduces them as they are: DDP's
                # compression hook sends the same bytes.
                from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
                model.register_comm_hook(None, default_hooks.fp16_compress_hook
                                         if self.half == torch.float16
                                         else default_hooks.bf16_compress_hook)
            self.ddp = True
        else:
            self.ddp = False
        self.model = model
        self.x, self.y = self.batch()

    def batch(self):
        torch, c = self.torch, self.c
        if c.get("batch_file"):
            t = read_safetensors(c["batch_file"], torch)
            x, y = t["images"], t["labels"]
        else:
            seed = (int(c["seed"]) * 1000003 + self.rank) % 2**64  # seeds up to 2^64 - 1
            g = torch.Generator().manual_seed(seed)
            n, s = int(c["batch"]), int(c["image_size"])
            x = torch.randn(n, 3, s, s, generator=g)
            y = torch.randint(0, self.classes, (n,), generator=g)
        x, y = x.to(self.device), y.to(self.device)
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        return x, y

    def allreduce_after_backward(self):
        """overlap=none: the gradients all-reduced in buckets of bucket_mb once backward is done,
        in the order backward produced them (the last parameters first), averaged; in 16 bits
        under fp16 and bf16, as dlbench's gradients are."""
        import torch.distributed as dist
        torch = self.torch
        grads = [p.grad for p in reversed(list(self.model.parameters())) if p.grad is not None]
        wire = self.half or torch.float32
        per = torch.tensor([], dtype=wire).element_size()
        bucket, size = [], 0
        for i, g in enumerate(grads):
            bucket.append(g)
            size += g.numel() * per
            if size >= self.bucket_bytes or i == len(grads) - 1:
                flat = torch.cat([b.reshape(-1).to(wire) for b in bucket])
                flat /= self.ranks  # first, as DDP's hooks do: a 16-bit sum of scaled
                dist.all_reduce(flat)  # gradients could overflow where their mean does not
                at = 0
                for b in bucket:
                    b.copy_(flat[at:at + b.numel()].view_as(b))  # back to the grad's type
                    at += b.numel()
                bucket, size = [], 0

    def step(self):
        torch = self.torch
        self.opt.zero_grad(set_to_none=True)
        amp = (torch.autocast(self.device.type, dtype=self.half) if self.half is not None
               else contextlib.nullcontext())
        with amp:
            logits = self.model(self.x)
        loss = torch.nn.functional.cross_entropy(logits.float(), self.y)
        self.scaler.scale(loss).backward()
        if self.ranks > 1 and not self.ddp:
            self.allreduce_after_backward()
        self.scaler.step(self.opt)
        self.scaler.update()
        return loss.detach()

    def phase(self, warmup: int, steps: int):
        """`warmup` untimed steps, then `steps` timed ones: (this rank's seconds for each step,
        its timed seconds, every loss)."""
        torch = self.torch
        losses = [self.step() for _ in range(warmup)]
        if self.cuda:
            marks = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
            torch.cuda.synchronize()
            marks[0].record()
            for i in range(steps):
                losses.append(self.step())
                marks[i + 1].record()
            torch.cuda.synchronize()
            times = [marks[i].elapsed_time(marks[i + 1]) / 1e3 for i in range(steps)]
            total = marks[0].elapsed_time(marks[-1]) / 1e3
        else:
            marks = [time.perf_counter()]
            for _ in range(steps):
                losses.append(self.step())
                marks.append(time.perf_counter())
            times = [marks[i + 1] - marks[i] for i in range(steps)]
            total = marks[-1] - marks[0]
        return times, total, [float(v) for v in losses]

    def slowest(self, values: list[float]) -> list[float]:
        """Each value's maximum across ranks (comm.max_across_ranks in dlbench)."""
        if self.ranks > 1:
            import torch.distributed as dist
            t = self.torch.tensor(values, dtype=self.torch.float64, device=self.device)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            values = t.tolist()
        return list(values)

    def timed(self):
        """The timed phases exactly as dlbench's measure_throughput runs them, each rank on its
        own times with dlbench's reductions across ranks: (each kept step's slowest-rank seconds,
        the slowest rank's timed seconds, every loss, the steps left out as warm-up, each
        phase's throughput)."""
        c = self.c
        steps, min_time = int(c["steps"]), float(c.get("min_time") or 0)
        images = int(c["batch"]) * self.ranks
        mine, my_total, losses, discarded, throughputs = [], 0.0, [], 0, []
        for rep in range(int(c.get("repetitions") or 1)):
            times, total, more_losses = self.phase(int(c["warmup"]) if rep == 0 else 0, steps)
            losses += more_losses
            # Every rank times as many more steps as the slowest rank's pace asks.
            more = int(self.slowest([float(extra_steps(
                steps, self.slowest([total])[0], min_time))])[0])
            if more > 0:
                t, s, more_losses = self.phase(0, more)
                times, total, losses = times + t, total + s, losses + more_losses
            if rep == 0 and int(c["warmup"]) > 0:  # the most any rank judged unsettled
                discarded = int(self.slowest([float(unsettled_steps(times))])[0])
                total -= sum(times[:discarded])
                times = times[discarded:]
            seconds = self.slowest([total])[0]
            throughputs.append(images * len(times) / seconds if seconds > 0 else math.inf)
            mine += times
            my_total += total
        # The record's step times and total are the slowest rank's, as dlbench's.
        return (self.slowest(mine), self.slowest([my_total])[0], losses, discarded,
                throughputs)


def extra_steps(steps: int, seconds: float, min_time: float) -> int:
    """More steps after `steps` took `seconds`, so that all take `min_time` at the same pace:
    dlbench's (suites/harness/core/timed_phase.h)."""
    if steps <= 0 or not seconds > 0 or seconds >= min_time:
        return 0
    total = steps * min_time / seconds
    return (2**31 - 1 if total >= 2**31 - 1 else math.ceil(total)) - steps


def repetition_json(throughputs: list[float]) -> dict:
    """dlbench's repetition_json: count, each throughput, median, mean, sample stddev, CV."""
    n = len(throughputs)
    mean = sum(throughputs) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in throughputs) / (n - 1)) if n > 1 else 0.0
    return {"count": n, "throughput_img_s": throughputs, "median": percentile(throughputs, 50),
            "mean": mean, "stddev": sd, "cv": sd / mean if mean > 0 else 0.0}


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks, as dlbench's percentile (runtime/core/stats)."""
    s = sorted(values)
    if len(s) == 1:
        return s[0]
    pos = q / 100 * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def step_fences(times: list[float]) -> tuple[float, float]:
    """Tukey's fences, each at least 5% from the median: dlbench's (suites/harness/core/timed_phase.h)."""
    q1, q3, med = percentile(times, 25), percentile(times, 75), percentile(times, 50)
    return min(q1 - 1.5 * (q3 - q1), 0.95 * med), max(q3 + 1.5 * (q3 - q1), 1.05 * med)


def unsettled_steps(times: list[float]) -> int:
    """The leading timed steps dlbench would judge still warming up and leave out (above the
    second half's upper fence, up to the first within it, at most half): the same rule, so that
    the two systems time the same kind of steps."""
    n = len(times)
    if n < 4:
        return 0
    fence = step_fences(times[n // 2:])[1]
    k = 0
    while k < n // 2 and times[k] > fence:
        k += 1
    return k


def environment(c: dict, torch, torchvision, run: Run | None) -> dict:
    git = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty", "--abbrev=12"],
                         capture_output=True, text=True).stdout.strip()
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")),
                       cpu)
    except OSError:
        pass
    cuda = c["backend"] == "cuda" and torch.cuda.is_available()
    env = {
        "system": "pytorch", "torch": torch.__version__, "torchvision": torchvision.__version__,
        "python": platform.python_version(), "host": socket.gethostname(),
        "backend": f"pytorch-{c['backend']}", "git_sha": git or "unknown",
        "dlbench_version": "none",
        "time": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "cpu": cpu, "driver": "none", "cuda": torch.version.cuda or "none",
        "cudnn": str(torch.backends.cudnn.version()) if cuda else "none",
        "nccl": ".".join(map(str, torch.cuda.nccl.version())) if cuda else "none",
        "mpi": "none",
        "comm": ("nccl" if cuda else "gloo") if run and run.ranks > 1 else "none",
    }
    if cuda:
        env["device"] = torch.cuda.get_device_name()
    else:
        env["device"] = "cpu"
        env["cpu_threads"] = torch.get_num_threads()
    return env


def record(c: dict, status: str, **fields) -> dict:
    config = {k: v for k, v in c.items() if k not in ("init", "batch_file")}  # inputs, not config
    r = {"schema_version": 1, "kind": "train", "status": status, "mode": "measured",
         "config": config, "global_batch": int(c["batch"]) * int(c["ranks"])}
    r.update(fields)
    return r


def non_finite(node, at: str = "") -> list[str]:
    """The dotted keys of the numbers in `node` that are not finite."""
    if isinstance(node, float) and not math.isfinite(node):
        return [at]
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in non_finite(v, f"{at}.{k}" if at else k)]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in non_finite(v, f"{at}[{i}]")]
    return []


def strict_record(rec: dict) -> dict:
    """The record as JSON can hold it: one with a number that is not finite (a throughput over no
    time) becomes failed, naming them, without its metrics."""
    bad = non_finite(rec)
    if not bad:
        return rec
    out = {k: v for k, v in rec.items() if k not in ("metrics", "memory")}
    out.update(status="failed", message="not finite: " + ", ".join(bad[:6]))
    return out


def record_text(rec: dict, indent: int | None = None) -> str:
    """Strict JSON (no NaN or Infinity: allow_nan=False)."""
    return json.dumps(strict_record(rec), indent=indent, allow_nan=False)


def record_path_problem(path: str) -> str | None:
    """Why the record cannot be written to `path`, or None: its directory is missing, or it
    exists and is not a regular file (a device or FIFO would be replaced by the rename)."""
    if not os.path.isdir(os.path.dirname(path) or "."):
        return "its directory does not exist"
    if os.path.exists(path) and not stat.S_ISREG(os.stat(path).st_mode):
        return "it exists and is not a regular file"
    return None


def write_record(path: str, rec: dict) -> None:
    """The record, whole or not at all: to a temporary file of a name no one else has, renamed."""
    fd, tmp = tempfile.mkstemp(prefix=".pytorch-record-", dir=os.path.dirname(path) or ".")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(record_text(rec, indent=2) + "\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def train(c: dict, torch, torchvision) -> tuple[dict, int]:
    check_supported(c, torch)
    run = Run(c, torch, torchvision)
    times, total, losses, discarded, throughputs = run.timed()
    median = percentile(times, 50)
    m = {"params": run.params,  # no time measured: inf, which strict_record refuses
         "throughput_img_s": (int(c["batch"]) * run.ranks * len(times) / total if total > 0
                              else math.inf),
         "timed_seconds": total,
         "timed_steps": len(times),
         "warmup_discarded_steps": discarded,
         "step_time_s": {"median": median, "p10": percentile(times, 10),
                         "p90": percentile(times, 90), "all": times},
         "losses": [v if v == v and abs(v) != float("inf") else None for v in losses]}
    if len(throughputs) > 1:
        m["repetitions"] = repetition_json(throughputs)
    if c["precision"] == "fp16":
        m["loss_scale"] = float(run.scaler.get_scale())
    fields = {"environment": environment(c, torch, torchvision, run), "metrics": m}
    if run.cuda:  # the caching allocator's high-water mark: tensors, not its reserve
        fields["memory"] = {"peak_bytes_by_category": {},
                            "peak_bytes_total": int(torch.cuda.max_memory_allocated())}
    rank = run.rank
    if run.ranks > 1:
        torch.distributed.destroy_process_group()
    if any(v is None for v in m["losses"]):
        return record(c, "diverged", message="the loss became inf or NaN", **fields), rank
    if min(times + [total]) <= 0:
        return record(c, "failed", message="the clock measured no time for a step"), rank
    return record(c, "ok", **fields), rank


# A point given by hand: dlbench's defaults for what is not given (its option table).
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--point", help="the harness's point file")
    ap.add_argument("--model", choices=TORCHVISION_MODELS)
    ap.add_argument("--batch", type=int)
    ap.add_argument("--image-size", type=int)
    defaults = dlbench_defaults()
    ap.add_argument("--precision", default=defaults["precision"],
                    choices=["fp32", "tf32", "fp16", "bf16"])
    ap.add_argument("--backend", default=defaults["backend"], choices=["cpu", "cuda"])
    ap.add_argument("--steps", type=int, default=defaults["steps"])
    ap.add_argument("--warmup", type=int, default=defaults["warmup"])
    ap.add_argument("--ranks", type=int, default=defaults["ranks"],
                    help="as started by mpirun -np or srun -n")
    a = ap.parse_args()
    for name, least in (("batch", 1), ("image_size", 1), ("steps", 1), ("warmup", 0),
                        ("ranks", 1)):
        v = getattr(a, name)
        if v is not None and v < least:
            ap.error(f"--{name.replace('_', '-')} must be >= {least} (got {v})")
    if a.point:
        try:
            c, out = read_point(a.point)
            problem = record_path_problem(out)
            if problem:
                raise PointError(f"{a.point}: record: {out}: {problem}")
        except PointError as e:
            print(f"pytorch_train: error: {e}", file=sys.stderr)
            return 2
    elif a.model and a.batch and a.image_size:
        c = dict(defaults, model=a.model, batch=a.batch, image_size=a.image_size,
                 precision=a.precision, backend=a.backend, steps=a.steps, warmup=a.warmup,
                 ranks=a.ranks)
        out = None
    else:
        ap.error("give --point FILE, or --model, --batch and --image-size")
    c["system"] = "pytorch"
    try:
        rank = rank_and_size(int(c["ranks"]))[0]
    except Unsupported as e:  # every process says so; the launcher's rank 0 (or a lone one) writes
        if launcher_rank() == 0:
            rec = record(c, "unsupported", message=str(e))
            write_record(out, rec) if out else print(record_text(rec))
        return 4
    try:
        import torch
        import torchvision
    except ImportError as e:
        rec = record(c, "unsupported", message=f"PyTorch is not installed for {sys.executable}: {e}")
        if rank == 0:
            write_record(out, rec) if out else print(record_text(rec))
        return 4
    try:
        rec, rank = train(c, torch, torchvision)
    except Unsupported as e:
        rec, code = record(c, "unsupported", message=str(e)), 4
    except Exception as e:  # the point's failure, recorded; the sweep goes on
        traceback.print_exc()
        oom = "out of memory" in str(e).lower()
        rec, code = record(c, "oom" if oom else "failed", message=f"{type(e).__name__}: {e}"), 1
    else:
        code = 7 if rec["status"] == "diverged" else 0
    if rank == 0:
        if out:
            write_record(out, rec)
        else:
            print(record_text(rec))
    return code


if __name__ == "__main__":
    sys.exit(main())
