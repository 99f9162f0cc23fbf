"""The shell in README.md and docs/*.md: it parses, it names real commands, and the README's
decode command translates every sentence.

A reader pastes these blocks into a shell, so a prose line that lost its ``#`` (it happened:
`` (a) train the stock model``) is a bug here, not a typo.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import List, NamedTuple

import pytest
from conftest import ROOT
from robustness_helpers import BIN, run, tiny_checkpoint, tiny_corpus

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_LABELS = {"", "bash", "sh", "shell"}
FENCE = re.compile(r"^```(\S*)\s*$")

# First words that are neither on the venv's PATH nor a file of this repository.
SHELL_WORDS = {"cd", "export", "for", "do", "done", "if", "then", "fi", "while", "source", "."}


class Block(NamedTuple):
    path: Path
    line: int  # 1-based line of the first line inside the fence
    label: str
    text: str


def code_blocks(path: Path) -> List[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m:
            start, body = i + 1, []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            blocks.append(Block(path, start + 1, m.group(1), "\n".join(body) + "\n"))
        i += 1
    return blocks


def shell_blocks() -> List[Block]:
    out = []
    for path in DOCS:
        for b in code_blocks(path):
            if b.label in SHELL_LABELS:  # program output is labelled ```text
                out.append(b)
    return out


def command_words(text: str) -> List[str]:
    """The first word of every command line (comments, continuations and VAR=... skipped)."""
    words, continued = [], False
    for line in text.splitlines():
        stripped = line.strip()
        starts_command = not continued and stripped and not stripped.startswith("#")
        continued = stripped.endswith("\\")
        if not starts_command:
            continue
        try:
            tokens = shlex.split(stripped, comments=True)
        except ValueError:
            tokens = stripped.split()
        tokens = [t for t in tokens if not re.match(r"^[A-Z_][A-Z0-9_]*=", t)]
        if tokens:
            words.append(tokens[0])
    return words


def is_command(word: str) -> bool:
    if word in SHELL_WORDS or (ROOT / word).exists():
        return True
    return shutil.which(word, path=f"{BIN}:/usr/local/bin:/usr/bin:/bin") is not None


def test_the_docs_have_the_shell_blocks_this_test_reads():
    blocks = shell_blocks()
    names = {b.path.name for b in blocks}
    assert {"README.md", "methods.md", "recipes.md"} <= names and len(blocks) >= 12


@pytest.mark.parametrize(
    "block", shell_blocks(), ids=lambda b: f"{b.path.relative_to(ROOT)}:{b.line}"
)
def test_every_shell_block_parses_and_names_commands(block):
    proc = subprocess.run(["bash", "-n"], input=block.text, capture_output=True, text=True)
    assert proc.returncode == 0, f"{block.path.name}:{block.line}: {proc.stderr}"
    unknown = [w for w in command_words(block.text) if not is_command(w)]
    # usage notation ([--opt X]) is for --help texts: pasted, the brackets are arguments
    optional = [line for line in block.text.splitlines()
                if "[--" in line.split("#", 1)[0] and not line.lstrip().startswith("#")]  # fmt: skip
    assert not optional, f"{block.path.name}:{block.line}: [--...] in a command: {optional}"
    assert not unknown, (
        f"{block.path.name}:{block.line}: not commands (a comment without '#'?): {unknown}"
    )


def test_the_checks_catch_a_comment_line_without_its_hash():
    # The two ways a lost '#' shows: a syntax error, or a word that is not a command.
    bad = subprocess.run(["bash", "-n"], input=" (a) train the stock model\n", text=True,
                         capture_output=True)  # fmt: skip
    assert bad.returncode != 0
    words = command_words(" Data. IWSLT14 De-En, the standard split\nbash x.sh \\\n  --out d\n")
    assert words == ["Data.", "bash"] and not is_command("Data.") and is_command("dsp-strip")


# -- links ----------------------------------------------------------------------------
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#+ (.*)$", re.M)


def anchor_of(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation but - and _ dropped, spaces to -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def broken_links(doc: Path) -> List[str]:
    """The relative links of a markdown file whose file, or heading anchor, does not exist."""
    broken = []
    for link in LINK.findall(doc.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", link):  # http(s), mailto
            continue
        path, _, fragment = link.partition("#")
        target = (doc.parent / path).resolve() if path else doc
        if not target.exists():
            broken.append(f"{link} (no such file)")
        elif fragment and target.suffix == ".md":
            headings = HEADING.findall(target.read_text(encoding="utf-8"))
            if fragment not in {anchor_of(h) for h in headings}:
                broken.append(f"{link} (no such heading)")
    return broken


@pytest.mark.parametrize(
    "doc", [*DOCS, ROOT / "bench/RESULTS.md"], ids=lambda p: str(p.relative_to(ROOT))
)
def test_every_relative_link_finds_its_file_and_heading(doc):
    assert broken_links(doc) == []


def test_the_link_check_catches_a_missing_heading_and_file(tmp_path):
    doc = tmp_path / "a.md"
    (tmp_path / "b.md").write_text("# Uniform layouts (`--heads-per-attention`)\n")
    doc.write_text(
        "# Top\n[ok](b.md#uniform-layouts---heads-per-attention) [self](#top)"
        " [gone](b.md#uniform-layouts) [none](c.md) [web](https://x.org/#y)\n"
    )
    assert broken_links(doc) == ["b.md#uniform-layouts (no such heading)", "c.md (no such file)"]


# -- the README's decode command --------------------------------------------------------


def readme_decode_command() -> str:
    """The fairseq-generate command of the README's Decode section, continuation lines joined."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n### Decode\n", 1)[1]
    block = next(b for b in code_blocks_of(section) if "fairseq-generate" in b)
    return block.replace("\\\n", " ").strip()


def code_blocks_of(text: str) -> List[str]:
    return re.findall(r"^```\S*\n(.*?)^```", text, flags=re.S | re.M)


@pytest.fixture(scope="module")
def thirteen_sentences(tmp_path_factory) -> Path:
    """A test set of 13 sentences (not a multiple of 8) binarised with the tiny corpus's
    dictionaries, so the tiny checkpoint decodes it; returns the fairseq data folder."""
    corpus = tiny_corpus(tmp_path_factory)  # .../m30k/bin
    out = tmp_path_factory.mktemp("readme-decode")
    for lang in ("de", "en"):
        lines = (corpus.parent / "spm" / f"test.{lang}").read_text(encoding="utf-8").splitlines()
        (out / f"test13.{lang}").write_text("\n".join(lines[:13]) + "\n", encoding="utf-8")
    run(BIN / "fairseq-preprocess", "--source-lang", "de", "--target-lang", "en",
        "--srcdict", corpus / "dict.de.txt", "--tgtdict", corpus / "dict.en.txt",
        "--testpref", out / "test13", "--destdir", out / "bin", "--workers", "1")  # fmt: skip
    return out / "bin"


def test_readme_decode_command_translates_every_sentence(
    thirteen_sentences, tmp_path_factory, tmp_path
):
    command = readme_decode_command()
    assert "--required-batch-size-multiple 1" in command and '"$(dsp-user-dir)"' in command
    (tmp_path / "checkpoints").mkdir()
    run(BIN / "dsp-strip", "--input", tiny_checkpoint(tmp_path_factory),
        "--output", tmp_path / "checkpoints" / "pruned.pt", "--quiet")  # fmt: skip
    # Run word for word as the README gives it (bash expands "$(dsp-user-dir)"), from a folder
    # that is not the repository root and holds DATA and checkpoints/pruned.pt; --max-len-b
    # only keeps the untrained model's output short.
    (tmp_path / "DATA").symlink_to(thirteen_sentences, target_is_directory=True)
    proc = subprocess.run(["bash", "-c", f"{command} --max-len-b 5"], cwd=tmp_path,
                          capture_output=True, text=True, env=run_env(), timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    ids = sorted(int(line.split("\t")[0][2:]) for line in proc.stdout.splitlines()
                 if line.startswith("H-"))  # fmt: skip
    assert ids == list(range(13))
    # The control: fairseq's default batch multiple (8) drops sentences of this set, which is
    # what the README's option is there for.
    default = command.replace("--required-batch-size-multiple 1", "")
    proc = subprocess.run(["bash", "-c", f"{default} --max-len-b 5"], cwd=tmp_path,
                          capture_output=True, text=True, env=run_env(), timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert 0 < sum(line.startswith("H-") for line in proc.stdout.splitlines()) < 13


def run_env() -> dict:
    import os

    return dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", OMP_NUM_THREADS="1")
