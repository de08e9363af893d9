"""Score matrices, their readers and writers, bundled real data and splits."""

from bayeval.data.bundled import list_datasets, load_dataset
from bayeval.data.io import (
    from_frame,
    read_csv,
    read_matrix,
    read_npz,
    read_parquet,
    to_frame,
    write_csv,
    write_matrix,
    write_npz,
    write_parquet,
)
from bayeval.data.lm_eval import find_sample_files, read_lm_eval_samples
from bayeval.data.matrix import ScoreMatrix, infer_kind
from bayeval.data.splits import Split, make_split

__all__ = [
    "ScoreMatrix",
    "Split",
    "find_sample_files",
    "from_frame",
    "infer_kind",
    "list_datasets",
    "load_dataset",
    "make_split",
    "read_csv",
    "read_lm_eval_samples",
    "read_matrix",
    "read_npz",
    "read_parquet",
    "to_frame",
    "write_csv",
    "write_matrix",
    "write_npz",
    "write_parquet",
]
