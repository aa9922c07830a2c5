"""Image datasets for real training, read from local files only (nothing is downloaded).

- `digits`: scikit-learn's bundled 8x8 handwritten digits (1,797 images), always available.
- `mnist`, `fashion_mnist`: the IDX files torchvision's datasets use, from `DATA_DIR/MNIST/raw/` and
  `DATA_DIR/FashionMNIST/raw/` (plain or gzipped). Where DATA_DIR has no Fashion-MNIST, the files that
  Debian's `dataset-fashion-mnist` package installs (`/usr/share/datasets/fashion-mnist/`) are used.
- `cifar10`: the binary version (`DATA_DIR/cifar-10-batches-bin/`, as distributed by its authors).
  torchvision's CIFAR-10 class reads the Python version, which is pickled; nasutil never unpickles
  user files, so it reads the binary records (1 label byte + 3,072 pixel bytes) with numpy instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from nasutil.errors import NasutilError

DATASETS = ("digits", "mnist", "fashion_mnist", "cifar10")
#: each dataset's image shape (channels, height, width) and class count, known without loading it
SHAPES: dict[str, tuple[tuple[int, int, int], int]] = {
    "digits": ((1, 8, 8), 10), "mnist": ((1, 28, 28), 10), "fashion_mnist": ((1, 28, 28), 10),
    "cifar10": ((3, 32, 32), 10)}


@dataclass
class ImageData:
    """uint8 or float images as N x C x H x W tensors, int64 labels."""

    name: str
    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    num_classes: int

    @property
    def input_size(self) -> int:
        return int(self.train_x.shape[-1])


#: what every missing-dataset error ends with: where the data folder is set, by each front door
NEVER_DOWNLOADS = ("nasutil never downloads; give the data folder as NASUTIL_DATA_DIR, or trainer.data_dir= to "
                   "nasutil-search, data_dir= to nasutil-codes, --data-dir to nasutil codes train")

def load(name: str, data_dir: str | Path) -> ImageData:
    if name == "digits":
        return _digits()
    if name in ("mnist", "fashion_mnist"):
        return _idx(name, Path(data_dir))
    if name == "cifar10":
        return _cifar10(Path(data_dir))
    raise NasutilError(f"unknown dataset {name!r} (choose from {', '.join(DATASETS)})")


def _digits() -> ImageData:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = torch.tensor(bunch.images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(bunch.target, dtype=torch.int64)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))  # a fixed 80/20 split
    cut = int(0.8 * len(y))
    train, test = order[:cut], order[cut:]
    return ImageData("digits", x[train], y[train], x[test], y[test], 10)


_IDX = {"mnist": "MNIST", "fashion_mnist": "FashionMNIST"}
_IDX_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


#: where a system package puts a dataset's IDX files, gzipped, when the data folder has none
SYSTEM_IDX = {"fashion_mnist": Path("/usr/share/datasets/fashion-mnist")}


def _idx_folder(name: str, data_dir: Path) -> Path:
    """The first folder holding all four files, plain or gzipped: the data folder, then the system one."""
    folders = [data_dir / _IDX[name] / "raw"] + ([SYSTEM_IDX[name]] if name in SYSTEM_IDX else [])
    for folder in folders:
        if all(_idx_file(folder, f) is not None for f in _IDX_FILES):
            return folder
    raise NasutilError(f"dataset {name} not found: expected the IDX files {', '.join(_IDX_FILES)} (plain or .gz) in "
                       f"{str(folders[0])!r}" + (f" or {str(folders[1])!r} (apt-get install dataset-fashion-mnist)"
                                                 if len(folders) > 1 else "")
                       + f" ({NEVER_DOWNLOADS})")


def _idx_file(folder: Path, stem: str) -> Path | None:
    for path in (folder / stem, folder / f"{stem}.gz"):
        if path.is_file():
            return path
    return None


def read_idx(path: Path) -> torch.Tensor:
    """An IDX file of unsigned bytes (magic 0x0000 08 NDIM, then NDIM big-endian sizes, then the data),
    plain or gzipped."""
    import gzip

    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    if len(raw) < 4 or raw[:3] != b"\x00\x00\x08" or not 1 <= raw[3] <= 4:
        raise NasutilError(f"{path} is not an IDX file of unsigned bytes")
    ndim = raw[3]
    shape = tuple(int(v) for v in np.frombuffer(raw, dtype=">i4", count=ndim, offset=4))
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(shape)):
        raise NasutilError(f"{path} holds {data.size} values for a shape of {shape}")
    return torch.from_numpy(data.reshape(shape).copy())


def _idx(name: str, data_dir: Path) -> ImageData:
    folder = _idx_folder(name, data_dir)
    train_x, train_y, test_x, test_y = (read_idx(_idx_file(folder, f)) for f in _IDX_FILES)
    if train_x.ndim != 3 or test_x.ndim != 3 or len(train_x) != len(train_y) or len(test_x) != len(test_y):
        raise NasutilError(f"dataset {name} in {str(folder)!r} is malformed: images and labels do not match")
    return ImageData(name, train_x.unsqueeze(1), train_y.long(), test_x.unsqueeze(1), test_y.long(), 10)


_CIFAR_TRAIN = tuple(f"data_batch_{i}.bin" for i in range(1, 6))
_CIFAR_TEST = "test_batch.bin"
_RECORD = 1 + 3 * 32 * 32


def _cifar10(data_dir: Path) -> ImageData:
    folder = data_dir / "cifar-10-batches-bin"
    missing = [f for f in (*_CIFAR_TRAIN, _CIFAR_TEST) if not (folder / f).is_file()]
    if missing:
        hint = (" (found cifar-10-batches-py, the pickled Python version, which nasutil does not read: use the "
                "binary version)") if (data_dir / "cifar-10-batches-py").exists() else ""
        raise NasutilError(f"dataset cifar10 not found: expected {', '.join(missing[:2])}{'...' if len(missing) > 2 else ''} "
                           f"in {str(folder)!r}{hint} ({NEVER_DOWNLOADS})")

    def read(files: tuple[str, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        chunks = []
        for f in files:
            data = np.fromfile(folder / f, dtype=np.uint8)
            if data.size % _RECORD:
                raise NasutilError(f"{folder / f} is not a CIFAR-10 binary batch ({data.size} bytes)")
            chunks.append(data.reshape(-1, _RECORD))
        records = np.concatenate(chunks)
        return (torch.from_numpy(records[:, 1:].reshape(-1, 3, 32, 32).copy()),
                torch.from_numpy(records[:, 0].astype(np.int64)))

    train_x, train_y = read(_CIFAR_TRAIN)
    test_x, test_y = read((_CIFAR_TEST,))
    if int(train_y.max()) > 9 or int(test_y.max()) > 9:
        raise NasutilError(f"{folder} holds labels above 9: not CIFAR-10's binary version")
    return ImageData("cifar10", train_x, train_y, test_x, test_y, 10)
