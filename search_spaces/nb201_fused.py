"""Many NAS-Bench-201 networks run as one: horizontal fusion of candidates that differ in their cell.

Every NAS-Bench-201 network has the same skeleton (stem, three stages of cells, two reduction blocks,
head) and differs only in the op on each of its cell's six edges. Stacked along the channels (candidate
p owns channels p*C to (p+1)*C), the whole group is one network whose every layer is one kernel for all
candidates:

- every convolution is a grouped convolution with one group per candidate, its BatchNorm folded in
  (inference only); on a cell edge the 1x1 and 3x3 convolutions of all candidates that use one share a
  single 3x3 kernel (a 1x1 weight is the centre of a zero 3x3 one, and a candidate without a
  convolution on that edge has zero weights);
- `skip_connect` and `avg_pool_3x3` act channel by channel, so they run over the whole stack and a
  mask keeps the candidates that have them; `none` adds nothing;
- the classifier is a batched matrix product, one matrix per candidate.

So a group of P cells launches about as many kernels as one network, against P times as many run one
after another. The price is arithmetic on zeros where candidates differ, and grouped convolutions of
few channels per group, which cuDNN runs slowly: on an H200 fusion pays at small batches only, behind
`streams` (BENCHMARKS.md). `nasutil colocate --strategy fused` measures it on any device.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from nasutil_search_spaces._blocks import ReLUConvBN, Zero

#: an edge's op as far as fusion cares
NONE, SKIP, CONV, POOL = "none", "skip", "conv", "pool"


def edge_kind(module: nn.Module) -> str:
    if isinstance(module, Zero):
        return NONE
    if isinstance(module, nn.Identity):
        return SKIP
    if isinstance(module, ReLUConvBN):
        return CONV
    if isinstance(module, nn.AvgPool2d):
        return POOL
    raise TypeError(f"no fused form for a NAS-Bench-201 edge of type {type(module).__name__}")


def fold_affine(bn: nn.BatchNorm2d) -> tuple[torch.Tensor, torch.Tensor]:
    """An eval-mode BatchNorm as a per-channel scale and shift, in float32."""
    scale = (bn.weight.float() if bn.weight is not None else 1.0) / torch.sqrt(bn.running_var.float() + bn.eps)
    shift = (bn.bias.float() if bn.bias is not None else 0.0) - bn.running_mean.float() * scale
    return scale, shift


def fold(conv: nn.Conv2d, bn: nn.BatchNorm2d) -> tuple[torch.Tensor, torch.Tensor]:
    """The weight and bias of `bn(conv(x))` in eval mode as one convolution, in float32."""
    scale, shift = fold_affine(bn)
    return conv.weight.float() * scale.reshape(-1, 1, 1, 1), shift


def _padded(weight: torch.Tensor, kernel: int) -> torch.Tensor:
    pad = (kernel - weight.shape[-1]) // 2
    return F.pad(weight, (pad, pad, pad, pad))


class FusedConv(nn.Module):
    """One grouped convolution (one group per candidate) with a bias, the candidates' weights stacked."""

    def __init__(self, weights: Sequence[torch.Tensor], biases: Sequence[torch.Tensor] | None, stride: int,
                 shared_input: bool = False) -> None:
        super().__init__()
        self.register_buffer("weight", torch.cat(list(weights)))
        self.register_buffer("bias", torch.cat(list(biases)) if biases is not None else None)
        self.stride = stride
        self.padding = self.weight.shape[-1] // 2
        self.groups = 1 if shared_input else len(weights)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, 1, self.groups)


class FusedEdges(nn.Module):
    """Every candidate's op on one cell edge, over the stacked channels."""

    def __init__(self, edges: Sequence[nn.Module], channels: int, like: torch.Tensor) -> None:
        super().__init__()
        kinds = [edge_kind(e) for e in edges]
        convs = [e for e in edges if isinstance(e, ReLUConvBN)]
        self.conv: FusedConv | None = None
        if convs:
            kernel = max(c[1].kernel_size[0] for c in convs)
            zero_w = torch.zeros(channels, channels, kernel, kernel, device=like.device)
            zero_b = torch.zeros(channels, device=like.device)
            weights, biases = [], []
            for e in edges:
                w, b = fold(e[1], e[2]) if isinstance(e, ReLUConvBN) else (zero_w, zero_b)
                weights.append(_padded(w, kernel))
                biases.append(b)
            self.conv = FusedConv(weights, biases, stride=1)
        self.skip = self._who(kinds, SKIP, channels, like, "skip_mask")
        self.pool = self._who(kinds, POOL, channels, like, "pool_mask")

    def _who(self, kinds: Sequence[str], kind: str, channels: int, like: torch.Tensor, mask_name: str) -> str:
        """'all' or 'none' of the candidates have `kind` here, or 'some': then a 0/1 mask over the channels
        (a buffer named `mask_name`) keeps those that have it."""
        has = [k == kind for k in kinds]
        mask = None
        if all(has) or not any(has):
            who = "all" if all(has) else "none"
        else:
            who = "some"
            mask = torch.tensor(has, dtype=torch.float32, device=like.device).repeat_interleave(channels)
            mask = mask.reshape(1, -1, 1, 1)
        self.register_buffer(mask_name, mask)
        return who

    @property
    def uses_relu(self) -> bool:
        return self.conv is not None

    def forward(self, x: torch.Tensor, relu_x: torch.Tensor | None, total: torch.Tensor | None) -> torch.Tensor | None:
        """`total` plus this edge's output (None while nothing has been added)."""
        terms: list[tuple[torch.Tensor, torch.Tensor | None]] = []
        if self.conv is not None:
            terms.append((self.conv(relu_x), None))
        if self.skip != "none":
            terms.append((x, self.skip_mask))
        if self.pool != "none":
            terms.append((F.avg_pool2d(x, 3, 1, 1, count_include_pad=False), self.pool_mask))
        for term, mask in terms:
            if total is None:
                total = term if mask is None else term * mask
            elif mask is None:
                total = total + term
            else:
                total = torch.addcmul(total, term, mask)
        return total


class FusedCell(nn.Module):
    def __init__(self, cells: Sequence[nn.Module], edge_names: Sequence[str], channels: int, like: torch.Tensor) -> None:
        super().__init__()
        self.edge_names = list(edge_names)
        self.edges = nn.ModuleList(FusedEdges([c.edges[name] for c in cells], channels, like) for name in edge_names)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        nodes, relus = [x], {}
        for name, edges in zip(self.edge_names, self.edges):
            to, frm = (int(n) for n in name.split("<-"))
            if len(nodes) <= to:
                nodes.append(None)
            if nodes[frm] is None:  # every edge into it was `none`: zeros, which a convolution's bias still sees
                nodes[frm] = torch.zeros_like(x)
            if edges.uses_relu and frm not in relus:
                relus[frm] = torch.relu(nodes[frm])
            nodes[to] = edges(nodes[frm], relus.get(frm), nodes[to])
        last = nodes[-1]
        return last if last is not None else torch.zeros_like(x)


class FusedReduction(nn.Module):
    def __init__(self, blocks: Sequence[nn.Module]) -> None:
        super().__init__()
        self.conv_a = FusedConv(*zip(*(fold(b.conv_a[1], b.conv_a[2]) for b in blocks)), stride=2)
        self.conv_b = FusedConv(*zip(*(fold(b.conv_b[1], b.conv_b[2]) for b in blocks)), stride=1)
        self.shortcut = FusedConv([b.downsample[1].weight.float() for b in blocks], None, stride=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        main = self.conv_b(torch.relu(self.conv_a(torch.relu(x))))
        return self.shortcut(F.avg_pool2d(x, 2, 2, ceil_mode=True)) + main


class FusedNB201Group(nn.Module):
    """P NAS-Bench-201 networks of one skeleton (channels, cells per stage, classes, input channels) as
    one network in eval mode. `forward(inputs)` takes one input per network (or one tensor shared by all)
    and returns one output per network."""

    def __init__(self, networks: Sequence[nn.Module], shared_input: bool) -> None:
        super().__init__()
        first = networks[0]
        like = first.classifier.weight
        self.count, self.shared_input = len(networks), shared_input
        self.stem = FusedConv(*zip(*(fold(n.stem[0], n.stem[1]) for n in networks)), stride=1,
                              shared_input=shared_input)
        blocks: list[nn.Module] = []
        for position, block in enumerate(first.cells):
            members = [n.cells[position] for n in networks]
            if hasattr(block, "edges"):
                blocks.append(FusedCell(members, list(block.edges.keys()), block.channels, like))
            else:
                blocks.append(FusedReduction(members))
        self.cells = nn.Sequential(*blocks)
        head = [fold_affine(n.head[0]) for n in networks]
        self.register_buffer("head_scale", torch.cat([s for s, _ in head]).reshape(1, -1, 1, 1))
        self.register_buffer("head_shift", torch.cat([b for _, b in head]).reshape(1, -1, 1, 1))
        self.register_buffer("classifier_weight", torch.stack([n.classifier.weight.float().t() for n in networks]))
        self.register_buffer("classifier_bias", torch.stack([n.classifier.bias.float() for n in networks]))

    def forward(self, inputs: Sequence[torch.Tensor] | torch.Tensor) -> list[torch.Tensor]:
        x = inputs if isinstance(inputs, torch.Tensor) else (inputs[0] if self.shared_input else torch.cat(list(inputs), 1))
        x = self.cells(self.stem(x))
        x = torch.relu(torch.addcmul(self.head_shift, x, self.head_scale))
        pooled = x.mean((2, 3)).reshape(x.shape[0], self.count, -1).transpose(0, 1)  # candidates, batch, channels
        logits = torch.baddbmm(self.classifier_bias.unsqueeze(1), pooled, self.classifier_weight)
        return list(logits.unbind(0))

