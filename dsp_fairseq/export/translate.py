"""Translate with an exported CTranslate2 model: sentencepiece in, sentencepiece out.

Needs only ``ctranslate2`` and ``sentencepiece`` (no torch, no fairseq). The decoding
settings default to ``fairseq-generate``'s: beam 5, length penalty 1 (scores divided by
the hypothesis length), at most 200 output tokens.
"""

from __future__ import annotations

from typing import Iterable, List, Optional, Sequence


class CT2Translator:
    """A CTranslate2 translator plus the sentencepiece model of the corpus."""

    def __init__(
        self,
        model_dir: str,
        spm_model: Optional[str] = None,
        threads: int = 1,
        compute_type: str = "default",
    ):
        import ctranslate2

        self.translator = ctranslate2.Translator(
            model_dir, device="cpu", compute_type=compute_type, inter_threads=1,
            intra_threads=threads,
        )  # fmt: skip
        self.spm = None
        if spm_model:
            import sentencepiece

            self.spm = sentencepiece.SentencePieceProcessor(model_file=spm_model)

    def translate_tokens(
        self,
        batch: Sequence[Sequence[str]],
        beam: int = 5,
        batch_size: int = 64,
        max_len: int = 200,
        length_penalty: float = 1.0,
    ) -> List[List[str]]:
        """Best hypothesis (tokens, without EOS) for each tokenized source sentence."""
        if not batch:
            return []
        results = self.translator.translate_batch(
            [list(tokens) for tokens in batch],
            beam_size=beam,
            max_batch_size=batch_size,
            max_decoding_length=max_len,
            length_penalty=length_penalty,
        )
        return [r.hypotheses[0] for r in results]

    def translate(self, lines: Iterable[str], **kwargs) -> List[str]:
        """Detokenized translations of raw sentences (sentencepiece-encoded and decoded)."""
        lines = [line.rstrip("\n") for line in lines]
        if self.spm is None:
            tokens = [line.split() for line in lines]
        else:
            tokens = self.spm.encode(lines, out_type=str)
        hyps = self.translate_tokens(tokens, **kwargs)
        if self.spm is None:
            return [" ".join(h) for h in hyps]
        return [self.spm.decode(h) for h in hyps]
