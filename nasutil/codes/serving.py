"""Serve a protected classifier on one device: the base and the code's parity work run together.

A request is a batch of `groups` groups of k queries. The base answers all k x groups queries; the
encoder and parity model answer the group's r parity queries; one output per group is taken as
unavailable (at random) and rebuilt by the decoder from the rest. On a GPU the base and the parity
work are prepared as one co-located group (`nasutil.colocate`, `streams` by default: each on its own
stream inside one CUDA graph), so the parity work fills capacity the base leaves idle.

Three ways of serving the same requests, for comparison:

- `unprotected`: the base alone (nothing can be rebuilt);
- `replicated`: the base and a second copy of it on every query (what a code replaces);
- `coded`: the base and the parity path, with one output per group rebuilt.

Each request is timed on the host from its copy into the input buffer to its served predictions
(synchronised), which is what a client waits for; `ServingResult` gives the median and tail of those
latencies, the queries served per second, and the accuracy of what was served. Queries per second
divide by the loop's whole wall time, the scoring of each answer against its label included (the
coded way also copies the base's own top-1 of the rebuilt queries back), so it reads a little low,
the coded way most.
"""

from __future__ import annotations

import copy
import statistics
import time
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn

from nasutil.codes.code import Code
from nasutil.errors import NasutilError
from nasutil.evaluator.timing import time_windows

WAYS = ("unprotected", "replicated", "coded")


@dataclass(frozen=True)
class ServingResult:
    way: str
    strategy: str  # the co-location strategy that ran the group
    k: int
    groups: int  # groups per request
    requests: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    queries_per_s: float
    accuracy: float  # of the predictions served (rebuilt ones included) against the labels
    rebuilt_accuracy: float | None  # of the rebuilt predictions alone, against the labels (coded only)
    reconstruction_accuracy: float | None  # rebuilt top-1 equals the base's own (coded only)
    replay_ms: float  # the group's replay alone, back to back (the evaluator's window timer: a second clock)

    def to_dict(self) -> dict:
        return asdict(self)


class _ParityPath(nn.Module):
    """Encoder then parity model: B x k queries in, B*r parity outputs out."""

    def __init__(self, code: Code, k: int) -> None:
        super().__init__()
        self.code, self.k = code, k

    def forward(self, queries: torch.Tensor) -> torch.Tensor:
        groups = queries.view(-1, self.k, *queries.shape[1:])
        parity = self.code.encoder(groups)
        return self.code.parity_model(parity.flatten(0, 1))


def serve(way: str, base: nn.Module, code: Code, images: torch.Tensor, labels: torch.Tensor, *, groups: int,
          strategy: str = "streams", dtype: torch.dtype = torch.float16, seed: int = 0,
          max_requests: int | None = None) -> ServingResult:
    """Serve `images` (on the device) in requests of `groups` groups of k, the `way` given."""
    from nasutil.colocate import colocate

    if way not in WAYS:
        raise NasutilError(f"unknown way of serving {way!r} (choose from {', '.join(WAYS)})")
    if code.parity_model is None and way == "coded":
        raise NasutilError("serving a code needs a parity model (a code with parity=copy or a base spec)")
    if code.spec.decoder != "subtract" and way == "coded":
        raise NasutilError("serving rebuilds with the subtraction decoder; a learned decoder is scored by codes eval")
    k, per_request = code.spec.k, groups * code.spec.k
    requests = len(images) // per_request
    if max_requests is not None:
        requests = min(requests, max_requests)
    if requests < 2:
        raise NasutilError(f"{len(images)} images make fewer than two requests of {per_request} queries")
    device = images.device
    base = copy.deepcopy(base).to(dtype=dtype).eval()  # the caller's modules stay as they are
    code = copy.deepcopy(code).to(dtype=dtype).eval()
    models: list[nn.Module] = [base]
    if way == "replicated":
        models.append(copy.deepcopy(base))
    elif way == "coded":
        models.append(_ParityPath(code, k))
    fmt = torch.channels_last if images.dim() == 4 else torch.contiguous_format
    buffer = torch.zeros(per_request, *images.shape[1:], device=device, dtype=dtype).contiguous(memory_format=fmt)
    group = colocate(models, buffer, strategy)
    generator = torch.Generator(device="cpu").manual_seed(seed)
    erased_index = torch.randint(0, k, (requests, groups), generator=generator).to(device)

    served_right = rebuilt_right = agree = 0
    latencies = []
    with torch.inference_mode():
        group.run()  # one replay before the clock starts
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        started = time.perf_counter()
        for request in range(requests):
            t0 = time.perf_counter()
            rows = slice(request * per_request, (request + 1) * per_request)
            buffer.copy_(images[rows])
            outputs = group.run()
            logits = outputs[0].view(groups, k, -1)
            if way == "coded":
                erased = nn.functional.one_hot(erased_index[request], k).bool()
                parity = outputs[1].view(groups, code.spec.r, -1)
                rebuilt = code.rebuild(logits, parity, erased)
                served = torch.where(erased.unsqueeze(-1), rebuilt, logits)
            else:
                served = logits
            predicted = served.argmax(-1).flatten()
            predicted_cpu = predicted.cpu()  # synchronises: the client has its answers
            latencies.append((time.perf_counter() - t0) * 1e3)
            truth = labels[rows].cpu()
            served_right += int((predicted_cpu == truth).sum())
            if way == "coded":
                mask = erased.flatten().cpu()
                rebuilt_right += int((predicted_cpu[mask] == truth[mask]).sum())
                agree += int((predicted_cpu[mask] == logits.argmax(-1).flatten().cpu()[mask]).sum())
        elapsed = time.perf_counter() - started
        replay = time_windows(group.run, device, warmup=3, repeats=5, min_window_ms=5.0, max_iters=1000).median_ms
    latencies.sort()
    coded = way == "coded"
    return ServingResult(
        way=way, strategy=group.strategy, k=k, groups=groups, requests=requests,
        p50_ms=statistics.median(latencies), p99_ms=latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
        max_ms=latencies[-1], queries_per_s=requests * per_request / elapsed,
        accuracy=served_right / (requests * per_request),
        rebuilt_accuracy=rebuilt_right / (requests * groups) if coded else None,
        reconstruction_accuracy=agree / (requests * groups) if coded else None, replay_ms=replay)
