"""Helpers of the bash recipes in examples/translation/ that need fairseq or torch.

The text-only helpers (IWSLT14 extraction, Moses tokenization, BLEU, the
results table) live in ``scripts/`` so that they start without importing
fairseq.
"""
