"""A plain eager PyTorch training loop: the independent clock for the eager runs of population_search.py.

What a user of another tool would write to train one candidate: torch.optim.SGD (Nesterov momentum, weight
decay), a per-step cosine schedule from torch.optim.lr_scheduler, bf16 autocast, channels_last, the data
already on the device, then test accuracy. It shares with nasutil only the network builder and the dataset
reader, so its time per candidate checks the eager runs' trials, which go through nasutil's own training
step, and the "over a plain eager loop" ratios that divide by them.

    python benchmarks/plain_eager.py --arch '|nor_conv_3x3~0|+|...|' --batch-size 64
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time

import torch
import torch.nn.functional as F


def load_split(dataset: str, device: torch.device, valid_fraction: float = 0.1) -> dict:
    """The training split the search trains on (the same fixed validation hold-out), normalised, on the device."""
    from nasutil import datasets

    data = datasets.load(dataset, os.environ.get("NASUTIL_DATA_DIR", "data"))
    scale = 255.0 if data.train_x.dtype == torch.uint8 else 1.0
    x, test_x = data.train_x.float() / scale, data.test_x.float() / scale
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    train = order[int(round(valid_fraction * len(x))):]
    mean = x[train].mean(dim=(0, 2, 3), keepdim=True)
    std = x[train].std(dim=(0, 2, 3), keepdim=True).clamp_min(1e-6)
    return {"train": (((x[train] - mean) / std).to(device), data.train_y[train].to(device)),
            "test": (((test_x - mean) / std).to(device), data.test_y.to(device)),
            "num_classes": data.num_classes, "input_size": data.input_size}


def train_plain(arch: str, data: dict, space_spec: str = "nb201", batch_size: int = 64, epochs: int = 1,
                lr: float = 0.05, seed: int = 0, device: torch.device | None = None) -> dict:
    """Build, train and test one candidate with a textbook loop; seconds from the build to the test result."""
    from nasutil.registry import get_space

    device = device or torch.device("cuda")
    space = get_space(space_spec)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    started = time.perf_counter()
    torch.manual_seed(seed)
    model = space.build(space.parse(arch), num_classes=data["num_classes"], input_size=data["input_size"])
    model = model.to(device, memory_format=torch.channels_last)
    x, y = data["train"]
    steps_per_epoch = len(y) // batch_size
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, nesterov=True, weight_decay=5e-4)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs * steps_per_epoch)

    def inputs(batch: torch.Tensor) -> torch.Tensor:
        if batch.shape[1] != space.in_channels:
            batch = batch.expand(-1, space.in_channels, -1, -1)
        return batch.contiguous(memory_format=torch.channels_last)

    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(y), device=device)
        for step in range(steps_per_epoch):
            rows = order[step * batch_size:(step + 1) * batch_size]
            with torch.autocast(device.type, dtype=torch.bfloat16):
                loss = F.cross_entropy(model(inputs(x[rows])), y[rows])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
    model.eval()
    test_x, test_y = data["test"]
    correct = 0
    with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16):
        for start in range(0, len(test_y), 1024):
            correct += int((model(inputs(test_x[start:start + 1024])).argmax(1) == test_y[start:start + 1024]).sum())
    seconds = time.perf_counter() - started
    return {"arch": arch, "seconds": seconds, "steps": epochs * steps_per_epoch,
            "test_accuracy": 100.0 * correct / len(test_y), "final_loss": float(loss.detach()),
            "finite": math.isfinite(float(loss.detach()))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", nargs="+", required=True)
    parser.add_argument("--dataset", default="fashion_mnist")
    parser.add_argument("--space", default="nb201")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=1)
    args = parser.parse_args()
    from nasutil.errors import NasutilError

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        data = load_split(args.dataset, device)
        for arch in args.arch:
            print(json.dumps(train_plain(arch, data, args.space, args.batch_size, args.epochs, device=device)),
                  flush=True)
    except NasutilError as exc:  # a bad arch, space or dataset: one line, exit 2
        parser.exit(2, f"plain_eager.py: error: {exc}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
