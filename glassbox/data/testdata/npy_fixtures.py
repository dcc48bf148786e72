"""Fixtures for glassbox/data/formats_test.cpp, written and checked by real NumPy.

  python npy_fixtures.py write DIR        # writes the .npy files the C++ reader must read
  python npy_fixtures.py check FILE.npy RAW DTYPE SHAPE [FILE.npy RAW DTYPE SHAPE ...]
      # np.load(FILE.npy) must equal the raw little-endian bytes in RAW read as DTYPE with SHAPE
      # (e.g. "<f4" "3,4"); prints one line per file: "dtype shape order equal|DIFFERENT values"
"""
import sys

import numpy as np
from numpy.lib import format as npf


def save(path, arr, version=None):
    with open(path, "wb") as f:
        if version is None:
            np.save(f, arr)
        else:
            npf.write_array(f, arr, version=version)


def write(out):
    save(f"{out}/v1_f4.npy", (np.arange(12, dtype=np.float32).reshape(3, 4) * np.float32(0.25) - np.float32(1)))
    save(f"{out}/v2_i8.npy", np.array([-3, 0, 5, 2**40], dtype=np.int64), version=(2, 0))
    save(f"{out}/v3_u1.npy", np.arange(250, 256, dtype=np.uint8).reshape(2, 3), version=(3, 0))
    save(f"{out}/fortran_i4.npy", np.asfortranarray(np.arange(24, dtype=np.int32).reshape(2, 3, 4)))
    save(f"{out}/b1.npy", np.array([True, False, True]))
    save(f"{out}/i1.npy", np.array([-128, 127, 0], dtype=np.int8))
    save(f"{out}/i2.npy", np.array([-32768, 32767, 258], dtype=np.int16))
    save(f"{out}/u2.npy", np.array([0, 65535, 258], dtype=np.uint16))
    save(f"{out}/u4.npy", np.array([0, 4294967295], dtype=np.uint32))
    save(f"{out}/u8_ok.npy", np.array([1, 2**62], dtype=np.uint64))
    save(f"{out}/u8_big.npy", np.array([1, 2**64 - 1], dtype=np.uint64))
    save(f"{out}/f2.npy", np.array([0.5, -2.0, 65504.0], dtype=np.float16))
    save(f"{out}/f8.npy", np.array([[0.1, -1e300], [np.pi, 0.0]], dtype=np.float64))
    save(f"{out}/scalar_f8.npy", np.float64(2.5))
    save(f"{out}/empty_f4.npy", np.zeros((0, 5), dtype=np.float32))
    save(f"{out}/big_endian.npy", np.arange(4, dtype=">i4"))
    save(f"{out}/unicode.npy", np.array(["a", "bc"]))
    save(f"{out}/complex.npy", np.array([1 + 2j], dtype=np.complex64))
    save(f"{out}/structured.npy", np.zeros(2, dtype=[("x", "<f4"), ("y", "<i4")]))


def check(npy, raw, dtype, shape):
    a = np.load(npy)
    dims = tuple(int(s) for s in shape.split(",") if s != "")
    b = np.fromfile(raw, dtype=np.dtype(dtype)).reshape(dims)
    same = a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    flags = "C" if a.flags["C_CONTIGUOUS"] else "F"
    print(a.dtype.str, a.shape, flags, "equal" if same else "DIFFERENT", a.ravel()[:8].tolist())


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2])
    else:
        args = sys.argv[2:]
        for i in range(0, len(args), 4):
            check(*args[i:i + 4])
