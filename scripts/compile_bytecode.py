"""Write the bytecode of what the tools and the tests import, once, at install (make install).

pip installs with --no-compile: it compiles every file of every package on one core (torch,
scipy and sympy: about half of the install's time on a 2-core machine), while the tools import
about a quarter of them. Machines that set PYTHONDONTWRITEBYTECODE (these do) would otherwise
compile every import again in every process, so this writes the bytecode regardless: the
imports of the entry points, and the modules imported only on first use.
"""

import importlib
import os
import sys
import warnings

sys.dont_write_bytecode = False
# fairseq's sources compile with SyntaxWarnings, hydra warns of deprecations: not ours to show
warnings.simplefilter("ignore")
os.environ.setdefault("MPLBACKEND", "Agg")

ENTRY_POINTS = [
    "fairseq_cli.train",
    "fairseq_cli.generate",
    "fairseq_cli.validate",
    "fairseq_cli.preprocess",
    "fairseq_cli.interactive",
    "torch.distributed.run",
    # DistributedDataParallel's constructor imports torch._dynamo (and sympy through it)
    "torch._dynamo",
    "dsp_fairseq.cli.strip",
    "dsp_fairseq.cli.export_ct2",
    "dsp_fairseq.cli.translate_ct2",
    "dsp_fairseq.cli.pick_k",
    "dsp_fairseq.plots.report",
    "ctranslate2.converters",
    "matplotlib.pyplot",
    "sacrebleu",
    "sacremoses",
    "sentencepiece",
    "pytest",
    "xdist.plugin",
]


def main() -> int:
    failed = []
    for name in ENTRY_POINTS:
        try:
            importlib.import_module(name)
        except Exception as err:  # a missing optional tool only costs its compile time
            failed.append(f"{name} ({type(err).__name__}: {err})")
    try:  # every fairseq CLI composes its configuration with hydra, imported on first use
        from fairseq import options
        from fairseq.dataclass.utils import convert_namespace_to_omegaconf

        parser = options.get_training_parser()
        convert_namespace_to_omegaconf(
            options.parse_args_and_arch(parser, ["data", "--arch", "transformer"])
        )
    except Exception as err:
        failed.append(f"fairseq's configuration ({type(err).__name__}: {err})")
    for line in failed:
        print(f"compile_bytecode: not compiled: {line}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
