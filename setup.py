"""dsp-fairseq: exact-K attention-head pruning for fairseq Transformers.

fairseq itself is not listed in install_requires: both repackagings that
import on Python 3.11 (ve-fairseq, fairseq-fixed) declare torchaudio, which
would pull a second, multi-GB CUDA torch. ``make install`` installs
``ve-fairseq`` with ``--no-deps`` and its real runtime needs from
requirements.txt; see README.
"""

from setuptools import find_packages, setup

setup(
    name="dsp-fairseq",
    version="0.1.0",
    description="Differentiable Subset Pruning of attention heads for fairseq, with real head removal",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["dsp_fairseq", "dsp_fairseq.*"]),
    python_requires=">=3.11",
    install_requires=[
        "torch>=2.6",
        "sacrebleu>=2.0",
        "sentencepiece>=0.1.99",
        "matplotlib>=3.7",
    ],
    entry_points={
        "console_scripts": [
            "dsp-strip=dsp_fairseq.cli.strip:main",
            "dsp-export-ct2=dsp_fairseq.cli.export_ct2:main",
            "dsp-translate-ct2=dsp_fairseq.cli.translate_ct2:main",
            "dsp-importance=dsp_fairseq.cli.importance:main",
            "dsp-plot-heads=dsp_fairseq.cli.plot_heads:main",
            "dsp-plot-gates=dsp_fairseq.cli.plot_gates:main",
            "dsp-plot-sweep=dsp_fairseq.cli.plot_sweep:main",
            "dsp-pick-k=dsp_fairseq.cli.pick_k:main",
            "dsp-reconstruct=dsp_fairseq.cli.reconstruct:main",
            "dsp-user-dir=dsp_fairseq.cli.user_dir:main",
        ]
    },
)
