"""Pareto fronts and hypervolume: the few lines every search report and analysis needs, once."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

import numpy as np

T = TypeVar("T")


def pareto_mask(values: Sequence[Sequence[float]], directions: Sequence[str]) -> list[bool]:
    """True for each point no other point dominates (at least as good everywhere, better somewhere);
    `directions` holds "maximize" or "minimize" per objective."""
    signed = [[v if d == "maximize" else -v for v, d in zip(row, directions)] for row in values]
    mask = []
    for i, a in enumerate(signed):
        dominated = any(all(x >= y for x, y in zip(b, a)) and any(x > y for x, y in zip(b, a))
                        for j, b in enumerate(signed) if j != i)
        mask.append(not dominated)
    return mask


def front_2d(items: Iterable[T], x: Callable[[T], float], y: Callable[[T], float]) -> list[T]:
    """Items that no other item beats on both x and y (both maximised), largest x first; of equal
    points, the first one given."""
    out, best = [], -math.inf
    for item in sorted(items, key=lambda i: (-x(i), -y(i))):
        if y(item) > best:
            out.append(item)
            best = y(item)
    return out


def front_mask_2d(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """`front_2d` over arrays: a boolean mask of the front (both maximised)."""
    order = np.lexsort((-y, -x))  # x descending, ties by y descending, stable
    mask = np.zeros(len(x), dtype=bool)
    best = -np.inf
    for i in order:
        if y[i] > best:
            mask[i] = True
            best = y[i]
    return mask


def hypervolume_2d(points: Sequence[Sequence[float]], reference: Sequence[float]) -> float:
    """Area dominated by `points` (both objectives maximised) and bounded below by `reference`."""
    rx, ry = reference
    inside = sorted(((x, y) for x, y in points if x > rx and y > ry), key=lambda p: -p[0])
    area, best_y = 0.0, ry
    for x, y in inside:  # sweep from the largest first objective down
        if y > best_y:
            area += (x - rx) * (y - best_y)
            best_y = y
    return area
