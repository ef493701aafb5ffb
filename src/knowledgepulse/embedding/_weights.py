"""Reading the model's weights with one copy in memory."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ._minilm import ARCHITECTURE, pick_weights

__all__ = ["read_float32_weights"]


def read_float32_weights(model_file: Path) -> dict[str, npt.NDArray[np.float32]]:
    """The encoder's tensors from a ``model.safetensors`` of float32 tensors, read one by one.

    safetensors' own loaders hold the whole file (read into memory, or mapped and counted in
    the process's resident memory) while they copy each tensor out of it: twice the model's
    87 MiB at the peak. Reading each tensor straight into its array keeps one copy. Any other
    layout (another dtype, a malformed header) is read by safetensors itself.

    Raises:
        ModelDirectoryError: a tensor is missing or has another shape (see :func:`pick_weights`).
    """
    import json
    import struct

    try:
        with model_file.open("rb") as f:
            (header_size,) = struct.unpack("<Q", f.read(8))
            if header_size > model_file.stat().st_size - 8:
                raise ValueError("not a safetensors header")
            header = json.loads(f.read(header_size))
            entries = {name: entry for name, entry in header.items() if name != "__metadata__"}
            if all(entry.get("dtype") == "F32" for entry in entries.values()):
                wanted = {
                    name: entries.get(name) or entries.get(f"bert.{name}")
                    for name in ARCHITECTURE.weight_shapes()
                }
                arrays: dict[str, npt.NDArray[np.float32]] = {}
                for name, entry in wanted.items():
                    if entry is None:
                        continue  # pick_weights names what is missing
                    start, end = entry["data_offsets"]
                    f.seek(8 + header_size + start)
                    array = np.fromfile(f, dtype="<f4", count=(end - start) // 4)
                    arrays[name] = array.reshape(entry["shape"])
                return pick_weights(arrays, model_file)
    except (OSError, ValueError, KeyError, TypeError, struct.error):
        pass  # safetensors below reads it, or says what is wrong with it
    st_numpy: Any = importlib.import_module("safetensors.numpy")
    loaded = pick_weights(st_numpy.load_file(str(model_file)), model_file)
    return {name: np.asarray(array, dtype=np.float32) for name, array in loaded.items()}
