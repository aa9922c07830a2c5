"""What to measure: an architecture of a registered space, or a torchvision/timm model."""

from __future__ import annotations

from dataclasses import dataclass

import torch.nn as nn

from nasutil.arch import Arch
from nasutil.counting import ModelCounts
from nasutil.errors import NasutilError
from nasutil.zoo import build_zoo_model, check_zoo_model, is_zoo, split_model_spec, zoo_input_size


@dataclass(frozen=True)
class Candidate:
    space: str  # a space spec (e.g. "nb201", "nni:ProxylessNAS") or a zoo ("torchvision", "timm")
    arch: str  # the arch string, or the zoo model name (an `Arch` given here is kept as its string)

    def __post_init__(self) -> None:
        if isinstance(self.arch, Arch):  # what a space's `sample` or `parse` returns: take it as it is meant
            object.__setattr__(self, "arch", self.arch.to_string())
        if not isinstance(self.space, str) or not isinstance(self.arch, str):
            raise NasutilError(f"a Candidate is a space name and an arch string (or Arch), got "
                               f"{type(self.space).__name__} and {type(self.arch).__name__}")

    @classmethod
    def model(cls, spec: str) -> Candidate:
        zoo, name = split_model_spec(spec)
        check_zoo_model(zoo, name)
        return cls(zoo, name)


@dataclass
class BuiltCandidate:
    model: nn.Module
    arch: str  # canonical string
    arch_hash: str
    input_size: int
    in_channels: int
    space: str
    counts: ModelCounts | None = None  # FLOPs and params from the space's own op listing, where it has one


def resolve(candidate: Candidate, input_size: int | None) -> tuple[str, str, int, int]:
    """Validate without building: canonical arch string, hash, input size, input channels."""
    if is_zoo(candidate.space):
        check_zoo_model(candidate.space, candidate.arch)
        return candidate.arch, f"{candidate.space}:{candidate.arch}", input_size or zoo_input_size(
            candidate.space, candidate.arch), 3
    from nasutil.registry import get_space

    space = get_space(candidate.space)
    arch = space.parse(candidate.arch)
    return arch.to_string(), arch.canonical_hash(), space.check_input_size(input_size), space.in_channels


def build(candidate: Candidate, input_size: int | None, num_classes: int,
          without_storage: bool = False) -> BuiltCandidate:
    """The candidate's network. `without_storage`: built on PyTorch's meta device (no memory, no values; see
    `nasutil.evaluator.weights`) where its space lists its ops, so that FLOPs need no forward pass; every
    other network is built as usual."""
    if is_zoo(candidate.space):
        size = input_size or zoo_input_size(candidate.space, candidate.arch)
        model = build_zoo_model(candidate.space, candidate.arch, num_classes)
        return BuiltCandidate(model, candidate.arch, f"{candidate.space}:{candidate.arch}", size, 3, candidate.space)
    from nasutil.registry import get_space

    space = get_space(candidate.space)
    arch = space.parse(candidate.arch)
    size = space.check_input_size(input_size)
    counts = listed_counts(space, arch, num_classes, size)
    if without_storage and counts is not None:
        from nasutil.evaluator.weights import without_storage as on_meta

        with on_meta():
            model = space.build(arch, num_classes=num_classes, input_size=size)
    else:
        model = space.build(arch, num_classes=num_classes, input_size=size)
    return BuiltCandidate(model, arch.to_string(), arch.canonical_hash(), size, space.in_channels, candidate.space,
                          counts)


def listed_counts(space, arch, num_classes: int, input_size: int) -> ModelCounts | None:
    """Whole-network FLOPs and params from a space that lists its ops without building (nb201, mbconv):
    well under a millisecond, against tens of milliseconds for counting the built network.
    None where the space would have to trace the network to list them."""
    from nasutil.space import SearchSpace

    if type(space).operators is SearchSpace.operators:
        return None
    from nasutil.ops import network_flops, network_params

    ops = space.operators(arch, num_classes=num_classes, input_size=input_size)
    return ModelCounts(params=network_params(ops), flops_per_image=network_flops(ops), input_size=input_size)
