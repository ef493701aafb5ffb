"""``kp curate`` in a child process with the tests' hashing embedder (no model needed).

Run as ``python tests/scoring/curate_child.py ARGS...`` (the arguments after ``kp``). With
``KP_TEST_EMBED_DELAY`` set, each embedding call sleeps that many seconds, so that a test
can stop the run while it embeds. ``--first-pass static`` gets the tests' coarse hashing
embedder (:class:`_helpers.CoarseEmbedder`) as its first pass. With ``KP_TEST_PEAK_RSS_FILE`` set, the child writes its own
peak RSS (KiB) there as it ends: what the memory tests measure (the parent's
``RUSAGE_CHILDREN`` would also hold every earlier child of the test process).
"""

from __future__ import annotations

import os
import resource
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import numpy.typing as npt

from _helpers import CoarseEmbedder, HashingEmbedder


class _SlowHashing(HashingEmbedder):
    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        time.sleep(self.delay)
        return super().embed(texts)


def _peak_rss_kib() -> int:
    """This process's own peak RSS: VmHWM belongs to the memory map made at exec, whereas
    ``ru_maxrss`` keeps the forking parent's RSS (a test process of several GiB by the end of
    the suite)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # no /proc: the best there is


def main() -> int:
    from knowledgepulse import embedding
    from knowledgepulse.cli import main as kp_main

    delay = float(os.environ.get("KP_TEST_EMBED_DELAY", "0"))
    embedder = _SlowHashing(delay) if delay else HashingEmbedder()

    def choose(choice: str = "auto", *_: Any, **__: Any) -> Any:
        chosen = CoarseEmbedder() if choice == "static" else embedder
        return embedding.EmbedderChoice(
            embedding.check_embedder(chosen), "onnx", "the tests' hashing embedder"
        )

    embedding.choose_embedder = choose
    # This child runs the embedding curation (the embedder above); copies need no child.
    if sys.argv[1:2] == ["curate"] and "--by" not in sys.argv:
        sys.argv[2:2] = ["--by", "embedding"]
    try:
        return int(kp_main())  # argv from the command line: kp is the process
    finally:
        peak_file = os.environ.get("KP_TEST_PEAK_RSS_FILE")
        if peak_file:
            Path(peak_file).write_text(str(_peak_rss_kib()))


if __name__ == "__main__":
    sys.exit(main())
