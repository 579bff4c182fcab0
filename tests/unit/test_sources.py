"""Each converter of pipeline.sources on tiny files written in its source's own on-disk format."""

from __future__ import annotations

import gzip
import pickle
import struct
import urllib.error
import urllib.request

import numpy as np
import pytest

from pipeline import sources
from pipeline.sources import SourceError

# ------------------------------------------------------------------------------------------------ IDX


def idx_bytes(array: np.ndarray) -> bytes:
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(np.uint8).tobytes()


def tiny_idx_images(count: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(count, 4, 5), dtype=np.uint8)


def write_idx_dataset(folder, gzipped=False):
    arrays = {
        "train-images-idx3-ubyte": tiny_idx_images(3, seed=0),
        "train-labels-idx1-ubyte": np.array([5, 0, 9], dtype=np.uint8),
        "t10k-images-idx3-ubyte": tiny_idx_images(2, seed=1),
        "t10k-labels-idx1-ubyte": np.array([7, 1], dtype=np.uint8),
    }
    folder.mkdir(parents=True, exist_ok=True)
    for name, array in arrays.items():
        data = idx_bytes(array)
        if gzipped:
            (folder / f"{name}.gz").write_bytes(gzip.compress(data))
        else:
            (folder / name).write_bytes(data)
    return arrays


def test_read_idx_keeps_row_major_order(tmp_path):
    images = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    path = tmp_path / "images-idx3-ubyte"
    path.write_bytes(idx_bytes(images))
    result = sources.read_idx(path)
    assert result.dtype == np.uint8
    np.testing.assert_array_equal(result, images)
    assert result[1, 2, 3] == 23  # image 1, row 2, column 3


def test_read_idx_detects_gzip_by_magic_bytes(tmp_path):
    labels = np.array([3, 1, 4, 1, 5], dtype=np.uint8)
    path = tmp_path / "labels-without-gz-suffix"
    path.write_bytes(gzip.compress(idx_bytes(labels)))
    np.testing.assert_array_equal(sources.read_idx(path), labels)


def test_read_idx_rejects_truncated_payload(tmp_path):
    path = tmp_path / "train-images-idx3-ubyte"
    path.write_bytes(idx_bytes(tiny_idx_images(3, seed=0))[:-7])
    with pytest.raises(SourceError, match="payload") as caught:
        sources.read_idx(path)
    assert str(path) in str(caught.value)
    assert "\n" not in str(caught.value)


def test_read_idx_rejects_truncated_header(tmp_path):
    path = tmp_path / "short"
    path.write_bytes(bytes([0, 0, 0x08, 3, 0, 0]))
    with pytest.raises(SourceError, match="truncated IDX header") as caught:
        sources.read_idx(path)
    assert str(path) in str(caught.value)


def test_read_idx_rejects_bad_magic(tmp_path):
    path = tmp_path / "not-idx"
    path.write_bytes(b"\x01\x02" + idx_bytes(np.zeros(4, dtype=np.uint8))[2:])
    with pytest.raises(SourceError, match="magic") as caught:
        sources.read_idx(path)
    assert str(path) in str(caught.value)


def test_read_idx_rejects_non_ubyte_dtype(tmp_path):
    path = tmp_path / "floats"
    path.write_bytes(bytes([0, 0, 0x0D, 1]) + struct.pack(">I", 1) + b"\0\0\0\0")
    with pytest.raises(SourceError, match="0x0d") as caught:
        sources.read_idx(path)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize("gzipped", [False, True])
def test_load_idx_dataset_finds_torchvision_layout(tmp_path, gzipped):
    arrays = write_idx_dataset(tmp_path / "MNIST" / "raw", gzipped=gzipped)
    result = sources.load_idx_dataset(tmp_path)
    assert result["x_train"].shape == (3, 4, 5, 1)
    assert result["x_test"].shape == (2, 4, 5, 1)
    assert result["x_train"].dtype == np.uint8 and result["y_train"].dtype == np.int64
    np.testing.assert_array_equal(result["x_train"][..., 0], arrays["train-images-idx3-ubyte"])
    np.testing.assert_array_equal(result["x_test"][..., 0], arrays["t10k-images-idx3-ubyte"])
    np.testing.assert_array_equal(result["y_train"], [5, 0, 9])
    np.testing.assert_array_equal(result["y_test"], [7, 1])


def test_load_idx_dataset_prefers_uncompressed_copy(tmp_path):
    # torchvision leaves both the .gz and the extracted file side by side.
    folder = tmp_path / "FashionMNIST" / "raw"
    arrays = write_idx_dataset(folder, gzipped=False)
    for name in arrays:
        (folder / f"{name}.gz").write_bytes(b"\x1f\x8b broken")
    result = sources.load_idx_dataset(tmp_path)
    np.testing.assert_array_equal(result["y_train"], [5, 0, 9])


def test_load_idx_dataset_reports_missing_file(tmp_path):
    write_idx_dataset(tmp_path)
    (tmp_path / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(SourceError, match="t10k-labels-idx1-ubyte"):
        sources.load_idx_dataset(tmp_path)


def test_load_idx_dataset_rejects_count_mismatch(tmp_path):
    write_idx_dataset(tmp_path)
    (tmp_path / "t10k-labels-idx1-ubyte").write_bytes(idx_bytes(np.array([1, 2, 3], dtype=np.uint8)))
    with pytest.raises(SourceError, match="2 images but 3 labels"):
        sources.load_idx_dataset(tmp_path)


# ---------------------------------------------------------------------------------------------- CIFAR


def cifar_rows(count: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(count, 3072), dtype=np.uint8)


def write_cifar_batch(path, rows, labels, labels_key):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        pickle.dump({b"batch_label": b"tiny", b"data": rows, labels_key: list(labels)}, handle)


def test_cifar_row_is_channel_planes_then_rows(tmp_path):
    rows = np.zeros((1, 3072), dtype=np.uint8)
    # Blue plane (channel 2), row 5, column 7.
    rows[0, 2 * 1024 + 5 * 32 + 7] = 200
    # Red plane, row 0, column 31.
    rows[0, 31] = 17
    batch_dir = tmp_path / "cifar-10-batches-py"
    for index in range(1, 6):
        write_cifar_batch(batch_dir / f"data_batch_{index}", rows, [index], b"labels")
    write_cifar_batch(batch_dir / "test_batch", rows, [0], b"labels")
    result = sources.load_cifar_pickles(batch_dir, 10)
    image = result["x_train"][0]
    assert image.shape == (32, 32, 3)
    assert image[5, 7, 2] == 200 and image[0, 31, 0] == 17
    assert int(image.sum()) == 217


def test_load_cifar10_concatenates_batches_in_order(tmp_path):
    batch_dir = tmp_path / "cifar-10-batches-py"
    train_rows = [cifar_rows(1, seed) for seed in range(5)]
    for index, rows in enumerate(train_rows, start=1):
        write_cifar_batch(batch_dir / f"data_batch_{index}", rows, [index], b"labels")
    test_rows = cifar_rows(2, seed=9)
    write_cifar_batch(batch_dir / "test_batch", test_rows, [0, 9], b"labels")
    result = sources.load_cifar_pickles(batch_dir, 10)
    expected_train = np.concatenate(train_rows).reshape(5, 3, 32, 32).transpose(0, 2, 3, 1)
    np.testing.assert_array_equal(result["x_train"], expected_train)
    np.testing.assert_array_equal(result["x_test"], test_rows.reshape(2, 3, 32, 32).transpose(0, 2, 3, 1))
    np.testing.assert_array_equal(result["y_train"], [1, 2, 3, 4, 5])
    np.testing.assert_array_equal(result["y_test"], [0, 9])
    assert result["x_train"].dtype == np.uint8 and result["y_train"].dtype == np.int64


def test_load_cifar100_uses_fine_labels(tmp_path):
    batch_dir = tmp_path / "cifar-100-python"
    train_rows, test_rows = cifar_rows(3, seed=0), cifar_rows(2, seed=1)
    write_cifar_batch(batch_dir / "train", train_rows, [99, 0, 42], b"fine_labels")
    write_cifar_batch(batch_dir / "test", test_rows, [7, 98], b"fine_labels")
    result = sources.load_cifar_pickles(batch_dir, 100)
    np.testing.assert_array_equal(result["y_train"], [99, 0, 42])
    np.testing.assert_array_equal(result["y_test"], [7, 98])
    assert result["x_train"][2, 31, 31, 2] == train_rows[2, 3071]
    assert result["x_test"][1, 0, 1, 1] == test_rows[1, 1024 + 1]


def test_load_cifar_rejects_unknown_variant_and_bad_rows(tmp_path):
    with pytest.raises(SourceError, match="10 or 100"):
        sources.load_cifar_pickles(tmp_path, 20)
    write_cifar_batch(tmp_path / "train", np.zeros((2, 100), dtype=np.uint8), [0, 1], b"fine_labels")
    with pytest.raises(SourceError, match="3072") as caught:
        sources.load_cifar_pickles(tmp_path, 100)
    assert str(tmp_path / "train") in str(caught.value)


# ----------------------------------------------------------------------------------------------- SVHN


def write_svhn_mat(path, images_nhwc, labels):
    import scipy.io

    scipy.io.savemat(
        path,
        {
            "X": np.ascontiguousarray(images_nhwc.transpose(1, 2, 3, 0)),
            "y": np.asarray(labels, dtype=np.uint8).reshape(-1, 1),
        },
    )


def test_load_svhn_mats_moves_sample_axis_first_and_maps_ten_to_zero(tmp_path):
    rng = np.random.default_rng(0)
    train = rng.integers(0, 256, size=(3, 32, 32, 3), dtype=np.uint8)
    test = rng.integers(0, 256, size=(2, 32, 32, 3), dtype=np.uint8)
    train[1, 3, 30, 2] = 255
    write_svhn_mat(tmp_path / "train_32x32.mat", train, [10, 1, 9])
    write_svhn_mat(tmp_path / "test_32x32.mat", test, [5, 10])
    result = sources.load_svhn_mats(tmp_path)
    np.testing.assert_array_equal(result["x_train"], train)
    np.testing.assert_array_equal(result["x_test"], test)
    assert result["x_train"][1, 3, 30, 2] == 255
    np.testing.assert_array_equal(result["y_train"], [0, 1, 9])
    np.testing.assert_array_equal(result["y_test"], [5, 0])
    assert result["x_train"].dtype == np.uint8 and result["y_train"].dtype == np.int64


def test_load_svhn_mats_reads_matlab_layout_directly(tmp_path):
    # Build X the way the .mat stores it (H x W x C x N) and check one known pixel lands in N x H x W x C.
    import scipy.io

    matlab_x = np.zeros((32, 32, 3, 2), dtype=np.uint8)
    matlab_x[4, 6, 1, 1] = 123  # row 4, column 6, green, sample 1
    for name in ("train_32x32.mat", "test_32x32.mat"):
        scipy.io.savemat(tmp_path / name, {"X": matlab_x, "y": np.array([[3], [10]], dtype=np.uint8)})
    result = sources.load_svhn_mats(tmp_path)
    assert result["x_test"][1, 4, 6, 1] == 123
    assert int(result["x_test"].sum()) == 123


def test_load_svhn_mats_reports_missing_file(tmp_path):
    write_svhn_mat(tmp_path / "train_32x32.mat", np.zeros((1, 32, 32, 3), dtype=np.uint8), [1])
    with pytest.raises(SourceError, match="test_32x32.mat"):
        sources.load_svhn_mats(tmp_path)


# -------------------------------------------------------------------------------------------- FEMNIST


def test_femnist_split_inverts_pixels_keeps_their_layout_and_maps_writers():
    """The converter both FEMNIST sources share: per-user pixel lists in [0, 1] (1 = paper) -> uint8
    images, ink bright; writer ids from writer_ids, by sorted user name, the same in both splits."""
    ids = sources.writer_ids(["f0002_10", "f0001_33"], ["f0000_07", "f0001_33"])
    assert ids == {"f0000_07": 0, "f0001_33": 1, "f0002_10": 2}
    pixels = [[1.0] * 784, [0.0] * 784]
    pixels[1][3 * 28 + 20] = 1.0  # row 3, column 20 is background in an otherwise inked image
    x, y, writers = sources.femnist_split(
        ["f0002_10", "f0001_33"], [pixels, [[0.5] * 784, [0.25] * 784]], [[0, 61], [35, 9]], ids, "test"
    )
    assert x.shape == (4, 28, 28, 1) and x.dtype == np.uint8
    # 1.0 (white paper) -> 0 (dark background); 0.0 (ink) -> 255; 0.5 -> round(127.5) = 128; 0.25 -> 191.
    np.testing.assert_array_equal(x[:, 0, 0, 0], [0, 255, 128, 191])
    assert x[1, 3, 20, 0] == 0 and (x[1] == 255).sum() == 783
    np.testing.assert_array_equal(y, [0, 61, 35, 9])
    np.testing.assert_array_equal(writers, [2, 2, 1, 1])
    assert y.dtype == writers.dtype == np.int64


def test_femnist_split_rejects_labels_outside_the_62_classes():
    with pytest.raises(SourceError, match=r"0\.\.61"):
        sources.femnist_split(["u"], [[[0.0] * 784]], [[62]], {"u": 0}, "test")


def test_load_femnist_tff_h5(tmp_path):
    h5py = pytest.importorskip("h5py")

    def write(path, clients):
        with h5py.File(path, "w") as handle:
            for client, (pixels, labels) in clients.items():
                group = handle.create_group(f"examples/{client}")
                group["pixels"] = np.asarray(pixels, dtype=np.float32)
                group["label"] = np.asarray(labels, dtype=np.int32)

    ink_at_2_5 = np.ones((28, 28))
    ink_at_2_5[2, 5] = 0.0
    folder = tmp_path / "fed_emnist"
    folder.mkdir()
    write(
        folder / "fed_emnist_train.h5",
        {"f0010_01": ([ink_at_2_5, np.zeros((28, 28))], [61, 3]), "f0003_02": ([np.ones((28, 28))], [0])},
    )
    write(folder / "fed_emnist_test.h5", {"f0010_01": ([np.ones((28, 28))], [7])})
    result = sources.load_femnist_tff_h5(tmp_path)
    assert result["x_train"].shape == (3, 28, 28, 1)
    # Clients in sorted order: f0003_02 (id 0) then f0010_01 (id 1).
    np.testing.assert_array_equal(result["writer_train"], [0, 1, 1])
    np.testing.assert_array_equal(result["writer_test"], [1])
    np.testing.assert_array_equal(result["y_train"], [0, 61, 3])
    np.testing.assert_array_equal(result["y_test"], [7])
    assert result["x_train"][1, 2, 5, 0] == 255 and result["x_train"][1].sum() == 255
    assert (result["x_train"][2] == 255).all() and (result["x_train"][0] == 0).all()


def test_load_femnist_tff_h5_without_h5py_says_how_to_install(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_h5py(name, *args, **kwargs):
        if name == "h5py":
            raise ImportError("No module named 'h5py'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_h5py)
    with pytest.raises(SourceError, match="pip install h5py"):
        sources.load_femnist_tff_h5(tmp_path)


# ---------------------------------------------------------------------------------------------- fetch


@pytest.fixture
def no_internet(monkeypatch):
    # Every torchvision download goes through urllib.request.urlopen; fail it at once.
    def refuse(*args, **kwargs):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)


@pytest.mark.parametrize("name", ["mnist", "cifar10", "svhn"])
def test_fetch_without_internet_points_to_the_mirror(tmp_path, no_internet, name):
    with pytest.raises(SourceError) as caught:
        sources.fetch(name, tmp_path / name)
    message = str(caught.value)
    assert message.startswith(f"{name}: cannot download")
    assert "FEDFORGET_DATA_MIRROR" in message and f"{name}.npz" in message
    assert "\n" not in message


def test_fetch_femnist_without_internet_points_to_the_mirror(tmp_path, no_internet):
    pytest.importorskip("h5py")
    with pytest.raises(SourceError, match="FEDFORGET_DATA_MIRROR"):
        sources.fetch("femnist", tmp_path)


def test_fetch_converts_files_torchvision_left_on_disk(tmp_path, monkeypatch):
    # Stand in for a finished download: the files are where torchvision puts them.
    arrays = write_idx_dataset(tmp_path / "MNIST" / "raw")
    monkeypatch.setattr(sources, "download_torchvision", lambda name, root: None)
    result = sources.fetch("mnist", tmp_path)
    np.testing.assert_array_equal(result["x_test"][..., 0], arrays["t10k-images-idx3-ubyte"])
    np.testing.assert_array_equal(result["y_test"], [7, 1])


def test_fetch_rejects_unknown_dataset(tmp_path):
    with pytest.raises(SourceError, match="unknown_set: no source"):
        sources.fetch("unknown_set", tmp_path)
