"""What ``--data`` means, for every tool: one rule, one message.

Two kinds of folder are in use. fairseq's own tools and the ones that load a fairseq task
(``dsp-export-ct2``, ``dsp-importance``) read the *fairseq binaries folder*: the output of
``fairseq-preprocess`` (``dict.SRC.txt``, ``dict.TGT.txt``, ``SPLIT.SRC-TGT.SRC.bin`` ...).
The recipes and ``dsp-pick-k`` read the *prepared corpus folder* that
``examples/translation/prepare-*.sh`` writes: the binaries in ``bin/``, the sentencepiece
model in ``spm/spm.model`` and the raw text in ``raw/``, which BLEU needs.

Each tool accepts both and says which one it found: a prepared corpus folder given where
binaries are wanted stands for its ``bin/``; a binaries folder given where a prepared
corpus is wanted stands for the prepared corpus it lies in (``CORPUS/bin``). Anything else
is refused with one line that names the option and what the folder must contain.

No torch or fairseq here: the tools check their folders before those imports.
"""

from __future__ import annotations

import glob
import os
from typing import Optional, Tuple

BINARIES = "a fairseq binaries folder (fairseq-preprocess output: dict.SRC.txt, dict.TGT.txt)"
CORPUS = (
    "a prepared corpus folder (examples/translation/prepare-*.sh output: bin/ with the "
    "fairseq binaries, spm/spm.model)"
)


class DataFolderError(ValueError):
    """A --data folder that is missing or holds neither kind of data; the message says what to give."""


def _has_dicts(folder: str) -> bool:
    return len(glob.glob(os.path.join(glob.escape(folder), "dict.*.txt"))) >= 1


def _is_corpus(folder: str) -> bool:
    return _has_dicts(os.path.join(folder, "bin")) and os.path.isfile(
        os.path.join(folder, "spm", "spm.model")
    )


def _check_exists(option: str, path: str, want: str) -> None:
    if not path:
        raise DataFolderError(f"{option} is empty; give {want}")
    if not os.path.exists(path):
        raise DataFolderError(f"{option} {path}: no such folder; give {want}")
    if not os.path.isdir(path):
        raise DataFolderError(f"{option} {path} is a file, not a folder; give {want}")


def binaries_folder(option: str, path: str) -> Tuple[str, Optional[str]]:
    """(fairseq binaries folder, a note saying how it was found or None) for ``option path``."""
    _check_exists(option, path, f"{BINARIES}, or {CORPUS}")
    if _has_dicts(path):
        return path, None
    inner = os.path.join(path, "bin")
    if _has_dicts(inner):
        return (
            inner,
            f"{option} {path} is a prepared corpus folder; using its fairseq binaries {inner}",
        )
    raise DataFolderError(
        f"{option} {path} has no dict.*.txt (and no bin/ holding them); give {BINARIES}, "
        f"or {CORPUS}"
    )


def corpus_folder(option: str, path: str) -> Tuple[str, Optional[str]]:
    """(prepared corpus folder, a note saying how it was found or None) for ``option path``."""
    _check_exists(option, path, CORPUS)
    if _is_corpus(path):
        return path, None
    parent = os.path.dirname(os.path.abspath(path))
    if (
        _has_dicts(path)
        and _is_corpus(parent)
        and os.path.samefile(path, os.path.join(parent, "bin"))
    ):
        return (
            parent,
            f"{option} {path} is the bin/ of a prepared corpus; using the corpus {parent}",
        )
    if _has_dicts(path):
        raise DataFolderError(
            f"{option} {path} is a fairseq binaries folder, but this tool needs {CORPUS} (BLEU "
            "needs the sentencepiece model and the raw text): run prepare-multi30k.sh or "
            "prepare-iwslt14.sh and give its --out folder"
        )
    missing = [p for p in ("bin/dict.*.txt", "spm/spm.model")
               if not glob.glob(os.path.join(glob.escape(path), p))]  # fmt: skip
    raise DataFolderError(f"{option} {path} has no {' or '.join(missing)}; give {CORPUS}")


def missing_file(option: str, path: str, what: str, kind: str = "checkpoint file") -> Optional[str]:
    """The one-line message for ``option path`` when no such file is there, else None."""
    if os.path.isfile(path):
        return None
    state = "is a folder" if os.path.isdir(path) else f"no such {kind}"
    return f"{option} {path}: {state}; give {what}"
