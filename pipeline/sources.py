"""Converters from each dataset's own on-disk format to the prepared-dataset arrays.

The download stage (`pipeline.download`) calls `fetch(name, raw_root)`: the dataset's source downloader
(torchvision's dataset classes, which verify checksums, or the TFF archive for FEMNIST) puts the original
files under `raw_root`, and the converters below read those files into the prepared-dataset format:

    x_train, x_test: uint8, N x H x W x C (channels last; C = 1 for grayscale)
    y_train, y_test: int64, labels in 0..K-1
    writer_train, writer_test: int64, the natural client of each sample (FEMNIST only)

The converters are small pure functions of the files, so each is tested on tiny files written in the
source's format. Anything wrong with a file raises `SourceError` with a one-line message naming it.
"""

from __future__ import annotations

import gzip
import pickle
import urllib.error
from pathlib import Path

import numpy as np

MIRROR_ENV = "FEDFORGET_DATA_MIRROR"

IDX_UBYTE = 0x08
GZIP_MAGIC = b"\x1f\x8b"

IDX_FILES = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}

CIFAR_FILES: dict[int, dict] = {
    10: {"train": [f"data_batch_{i}" for i in range(1, 6)], "test": ["test_batch"], "labels": b"labels"},
    100: {"train": ["train"], "test": ["test"], "labels": b"fine_labels"},
}

FEMNIST_CLASSES = 62
FEMNIST_SIDE = 28
TFF_FEMNIST_URL = "https://storage.googleapis.com/tff-datasets-public/fed_emnist.tar.bz2"
TFF_FEMNIST_FILES = {"train": "fed_emnist_train.h5", "test": "fed_emnist_test.h5"}

# torchvision raises URLError/OSError from the socket, RuntimeError for a failed mirror loop or a bad checksum.
DOWNLOAD_ERRORS = (urllib.error.URLError, OSError, RuntimeError)


class SourceError(Exception):
    """A source file is missing, malformed or cannot be downloaded; the message is one line."""


# ---------------------------------------------------------------------------------------------- helpers


def find_file(raw_dir, names: list[str]) -> Path:
    """The one file under raw_dir called one of `names`, trying them in order of preference."""
    raw_dir = Path(raw_dir)
    for name in names:
        hits = sorted(raw_dir.rglob(name))
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            # Two copies could hold different data; picking one silently would hide that.
            raise SourceError(f"{raw_dir}: {len(hits)} files named {name} ({', '.join(map(str, hits))}); keep one")
    raise SourceError(f"{raw_dir}: no {' or '.join(names)} found under it")


def check_labels(labels: np.ndarray, num_classes: int, source) -> np.ndarray:
    labels = np.asarray(labels).astype(np.int64).reshape(-1)
    if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
        raise SourceError(f"{source}: labels must be in 0..{num_classes - 1}, got {labels.min()}..{labels.max()}")
    return labels


def check_same_length(images: np.ndarray, labels: np.ndarray, source) -> None:
    if len(images) != len(labels):
        raise SourceError(f"{source}: {len(images)} images but {len(labels)} labels")


def inverted_to_uint8(pixels: np.ndarray) -> np.ndarray:
    """NIST-derived floats (1.0 = white background, dark ink) -> uint8 with bright ink on dark, as MNIST.

    LEAF and TFF both keep the scan's polarity, scaled to [0, 1]; inverting makes FEMNIST look like the
    other grayscale datasets, so the same models and normalisation apply to all of them.
    """
    pixels = np.asarray(pixels, dtype=np.float64)
    return np.clip(np.rint((1.0 - pixels) * 255.0), 0, 255).astype(np.uint8)


# ------------------------------------------------------------------------------------ MNIST, Fashion-MNIST


def read_idx(path) -> np.ndarray:
    """An IDX file (the MNIST format, gzipped or not) as an unsigned-byte array of its declared dims."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        # Sniff rather than trust the suffix: torchvision leaves both forms, and people rename files.
        if raw[:2] == GZIP_MAGIC:
            raw = gzip.decompress(raw)
    except (OSError, EOFError) as error:
        raise SourceError(f"{path}: cannot read ({type(error).__name__}: {error})") from None
    if len(raw) < 4:
        raise SourceError(f"{path}: too short for an IDX header ({len(raw)} bytes)")
    if raw[0] != 0 or raw[1] != 0:
        raise SourceError(f"{path}: not an IDX file (magic number starts {raw[:2].hex()}, expected 0000)")
    if raw[2] != IDX_UBYTE:
        raise SourceError(f"{path}: IDX data type 0x{raw[2]:02x} is not supported (only 0x08, unsigned byte)")
    ndim = raw[3]
    header_size = 4 + 4 * ndim
    if len(raw) < header_size:
        raise SourceError(f"{path}: truncated IDX header ({len(raw)} bytes, {ndim} dims need {header_size})")
    dims = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    expected = int(np.prod(dims, dtype=np.int64))
    actual = len(raw) - header_size
    if actual != expected:
        raise SourceError(f"{path}: IDX payload has {actual} bytes, dims {dims} declare {expected}")
    return np.frombuffer(raw, dtype=np.uint8, offset=header_size).reshape(dims).copy()


def read_idx_split(raw_dir, images_name: str, labels_name: str) -> tuple[np.ndarray, np.ndarray]:
    # The uncompressed copy is preferred because torchvision keeps both and it skips a decompression.
    images_path = find_file(raw_dir, [images_name, images_name + ".gz"])
    labels_path = find_file(raw_dir, [labels_name, labels_name + ".gz"])
    images = read_idx(images_path)
    labels = read_idx(labels_path)
    if images.ndim != 3:
        raise SourceError(f"{images_path}: expected 3 dims (N, H, W), got {images.shape}")
    if labels.ndim != 1:
        raise SourceError(f"{labels_path}: expected 1 dim (N), got {labels.shape}")
    check_same_length(images, labels, f"{images_path} and {labels_path}")
    return images[..., np.newaxis], check_labels(labels, 10, labels_path)


def load_idx_dataset(raw_dir) -> dict:
    """MNIST or Fashion-MNIST from the four IDX files found anywhere under raw_dir."""
    x_train, y_train = read_idx_split(raw_dir, IDX_FILES["x_train"], IDX_FILES["y_train"])
    x_test, y_test = read_idx_split(raw_dir, IDX_FILES["x_test"], IDX_FILES["y_test"])
    return {"x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test}


# ---------------------------------------------------------------------------------------------- CIFAR


def read_cifar_batch(path: Path, labels_key: bytes) -> tuple[np.ndarray, np.ndarray]:
    try:
        with open(path, "rb") as handle:
            # The batches were pickled by Python 2; 'bytes' keeps their str keys and data undecoded.
            batch = pickle.load(handle, encoding="bytes")
    except (OSError, EOFError, pickle.UnpicklingError, ValueError) as error:
        raise SourceError(f"{path}: not a readable CIFAR batch ({type(error).__name__}: {error})") from None
    if not isinstance(batch, dict) or b"data" not in batch or labels_key not in batch:
        raise SourceError(f"{path}: a CIFAR batch needs keys b'data' and {labels_key!r}")
    data = np.asarray(batch[b"data"], dtype=np.uint8)
    if data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
        raise SourceError(f"{path}: data must be N x 3072, got {data.shape}")
    # Each row is the red plane, then green, then blue, each 32 rows of 32 pixels.
    images = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    labels = np.asarray(batch[labels_key])
    check_same_length(images, labels, path)
    return np.ascontiguousarray(images), labels


def read_cifar_split(batch_dir: Path, names: list[str], labels_key: bytes, num_classes: int):
    parts = [read_cifar_batch(find_file(batch_dir, [name]), labels_key) for name in names]
    images = np.concatenate([images for images, _ in parts])
    labels = np.concatenate([labels for _, labels in parts])
    return images, check_labels(labels, num_classes, f"{batch_dir} ({', '.join(names)})")


def load_cifar_pickles(batch_dir, variant: int) -> dict:
    """CIFAR-10 (variant 10) or CIFAR-100 with its 100 fine labels (variant 100) from the python batches."""
    if variant not in CIFAR_FILES:
        raise SourceError(f"{batch_dir}: CIFAR variant must be 10 or 100, got {variant!r}")
    files = CIFAR_FILES[variant]
    batch_dir = Path(batch_dir)
    x_train, y_train = read_cifar_split(batch_dir, files["train"], files["labels"], variant)
    x_test, y_test = read_cifar_split(batch_dir, files["test"], files["labels"], variant)
    return {"x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test}


# ----------------------------------------------------------------------------------------------- SVHN


def read_svhn_mat(path: Path) -> tuple[np.ndarray, np.ndarray]:
    import scipy.io  # only this converter needs scipy

    try:
        mat = scipy.io.loadmat(path)
    except (OSError, ValueError, TypeError, NotImplementedError) as error:
        raise SourceError(f"{path}: not a readable .mat file ({type(error).__name__}: {error})") from None
    if "X" not in mat or "y" not in mat:
        raise SourceError(f"{path}: an SVHN .mat file needs variables X and y")
    images, labels = np.asarray(mat["X"]), np.asarray(mat["y"]).reshape(-1)
    if images.ndim != 4 or images.shape[2] != 3:
        raise SourceError(f"{path}: X must be H x W x 3 x N, got {images.shape}")
    # MATLAB's layout puts the sample index last.
    images = np.ascontiguousarray(images.transpose(3, 0, 1, 2)).astype(np.uint8)
    check_same_length(images, labels, path)
    labels = labels.astype(np.int64)
    # SVHN labels digit 0 as class 10 (MATLAB's 1-based habit); the contract wants 0..9.
    labels[labels == 10] = 0
    return images, check_labels(labels, 10, path)


def load_svhn_mats(raw_dir) -> dict:
    """SVHN (cropped digits) from train_32x32.mat and test_32x32.mat found under raw_dir."""
    x_train, y_train = read_svhn_mat(find_file(raw_dir, ["train_32x32.mat"]))
    x_test, y_test = read_svhn_mat(find_file(raw_dir, ["test_32x32.mat"]))
    return {"x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test}


# -------------------------------------------------------------------------------------------- FEMNIST


def writer_ids(*user_lists) -> dict[str, int]:
    """One integer per user, by sorted name, shared by train and test so a writer keeps its id."""
    return {user: index for index, user in enumerate(sorted(set().union(*user_lists)))}


def femnist_split(users: list[str], pixels: list, labels: list, ids: dict[str, int], source) -> tuple:
    """Per-user pixel and label lists -> (images, labels, writers) in the contract's types."""
    counts = [len(user_labels) for user_labels in labels]
    images = [
        np.asarray(user_pixels, dtype=np.float64).reshape(-1, FEMNIST_SIDE, FEMNIST_SIDE, 1) for user_pixels in pixels
    ]
    empty = np.zeros((0, FEMNIST_SIDE, FEMNIST_SIDE, 1))
    x = inverted_to_uint8(np.concatenate(images) if images else empty)
    y = check_labels(np.concatenate(labels) if labels else np.zeros(0), FEMNIST_CLASSES, source)
    writers = np.repeat(np.array([ids[user] for user in users], dtype=np.int64), counts)
    return x, y, writers


def import_h5py():
    try:
        import h5py
    except ImportError:
        raise SourceError(
            f"femnist: the TFF FEMNIST source needs h5py (pip install h5py), "
            f"or set {MIRROR_ENV} to a folder holding femnist.npz"
        ) from None
    return h5py


def read_tff_h5(path: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{client id: (pixels, labels)} from one of TFF's federated EMNIST h5 files."""
    h5py = import_h5py()
    try:
        with h5py.File(path, "r") as handle:
            examples = handle["examples"]
            return {
                client: (examples[client]["pixels"][()], examples[client]["label"][()]) for client in sorted(examples)
            }
    except (OSError, KeyError) as error:
        raise SourceError(f"{path}: not a TFF federated EMNIST file ({type(error).__name__}: {error})") from None


def load_femnist_tff_h5(raw_dir) -> dict:
    """FEMNIST (62 classes) from TFF's fed_emnist_train.h5 and fed_emnist_test.h5 with writer ids."""
    import_h5py()  # fail on the missing dependency before searching for files
    clients = {split: read_tff_h5(find_file(raw_dir, [name])) for split, name in TFF_FEMNIST_FILES.items()}
    ids = writer_ids(*clients.values())
    arrays = {}
    for split, by_client in clients.items():
        users = list(by_client)
        pixels = [by_client[user][0] for user in users]
        labels = [by_client[user][1] for user in users]
        try:
            x, y, writers = femnist_split(users, pixels, labels, ids, f"{raw_dir} ({split})")
        except ValueError as error:
            raise SourceError(f"{raw_dir} ({split}): bad TFF pixels ({error})") from None
        arrays.update({f"x_{split}": x, f"y_{split}": y, f"writer_{split}": writers})
    return arrays


# ---------------------------------------------------------------------------------------------- fetch


def download_torchvision(name: str, raw_root: Path) -> None:
    """Let torchvision download and checksum the original files; its in-memory copies are not used."""
    from torchvision import datasets

    # One constructor per archive is enough: MNIST and CIFAR check every file of both splits.
    if name == "mnist":
        datasets.MNIST(raw_root, train=True, download=True)
    elif name == "fashion_mnist":
        datasets.FashionMNIST(raw_root, train=True, download=True)
    elif name == "cifar10":
        datasets.CIFAR10(raw_root, train=True, download=True)
    elif name == "cifar100":
        datasets.CIFAR100(raw_root, train=True, download=True)
    elif name == "svhn":
        datasets.SVHN(raw_root, split="train", download=True)
        datasets.SVHN(raw_root, split="test", download=True)


def download_tff_femnist(raw_root: Path) -> None:
    from torchvision.datasets.utils import download_and_extract_archive

    if all(list(raw_root.rglob(name)) for name in TFF_FEMNIST_FILES.values()):
        return
    download_and_extract_archive(TFF_FEMNIST_URL, download_root=str(raw_root))


CONVERTERS = {
    # torchvision's folder names under raw_root, so a root shared by several datasets stays unambiguous.
    "mnist": lambda root: load_idx_dataset(root / "MNIST"),
    "fashion_mnist": lambda root: load_idx_dataset(root / "FashionMNIST"),
    "cifar10": lambda root: load_cifar_pickles(root / "cifar-10-batches-py", 10),
    "cifar100": lambda root: load_cifar_pickles(root / "cifar-100-python", 100),
    "svhn": load_svhn_mats,
    "femnist": load_femnist_tff_h5,
}


def one_line(error: Exception) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}".rstrip(": ")


def fetch(name: str, raw_root) -> dict:
    """Download dataset `name` into raw_root with its source's downloader and convert it to the contract."""
    if name not in CONVERTERS:
        raise SourceError(f"{name}: no source for this dataset; known: {', '.join(CONVERTERS)}")
    raw_root = Path(raw_root)
    raw_root.mkdir(parents=True, exist_ok=True)
    if name == "femnist":
        import_h5py()  # before downloading hundreds of megabytes that could not be read
    try:
        if name == "femnist":
            download_tff_femnist(raw_root)
        else:
            download_torchvision(name, raw_root)
    except DOWNLOAD_ERRORS as error:
        raise SourceError(
            f"{name}: cannot download ({one_line(error)}) (no internet?); "
            f"set {MIRROR_ENV} to a folder holding {name}.npz"
        ) from None
    return CONVERTERS[name](raw_root)
