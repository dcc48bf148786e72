"""Helpers shared by the reference scripts: JSON-ready values and recorded warnings/errors."""
import math
import warnings

import numpy as np


def clean(x):
    """numpy -> plain Python with full-precision floats; NaN/inf -> None (JSON null)."""
    if isinstance(x, dict):
        return {str(k): clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean(v) for v in x]
    if isinstance(x, np.ndarray):
        return clean(x.tolist())
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, (float, np.floating)):
        x = float(x)
        return x if math.isfinite(x) else None
    if isinstance(x, np.str_):
        return str(x)
    return x


def call(notes, what, fn):
    """Runs fn, recording its warnings and its error (then returns None) in notes."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = fn()
        except Exception as e:  # noqa: BLE001 - report whatever the reference raises
            notes.append(f"{what}: error {type(e).__name__}: {e}")
            value = None
    for w in caught:
        notes.append(f"{what}: warning {w.category.__name__}: {w.message}")
    return value
