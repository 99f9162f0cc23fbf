"""Write the bytecode of what the tools and the tests import, once, at install (make install).

pip installs with --no-compile: it compiles every file of every package on one core (torch,
scipy and sympy: about half of the install's time on a 2-core machine), while the tools import
about a quarter of them. Machines that set PYTHONDONTWRITEBYTECODE (these do) would otherwise
compile every import again in every process, so this writes the bytecode regardless: the
imports of the entry points, and the modules imported only on first use.
"""

import importlib
import os
import subprocess
import sys
import warnings

sys.dont_write_bytecode = False
# fairseq's sources compile with SyntaxWarnings, hydra warns of deprecations: not ours to show
warnings.simplefilter("ignore")
os.environ.setdefault("MPLBACKEND", "Agg")

# Two groups, imported side by side by two processes (both compile torch's core; the rest
# splits about evenly): fairseq's tools, the plugin and fairseq's configuration (hydra) ...
FAIRSEQ_GROUP = [
    "fairseq_cli.train",
    "fairseq_cli.generate",
    "fairseq_cli.validate",
    "fairseq_cli.preprocess",
    "fairseq_cli.interactive",
    "dsp_fairseq.cli.strip",
    "dsp_fairseq.cli.export_ct2",
    "dsp_fairseq.cli.translate_ct2",
    "dsp_fairseq.cli.pick_k",
    "dsp_fairseq.plots.report",
]
# ... and the rest: DistributedDataParallel's constructor imports torch._dynamo (and sympy
# through it), CTranslate2's converters, plotting, scoring, the test runner
OTHER_GROUP = [
    "torch.distributed.run",
    "torch._dynamo",
    "ctranslate2.converters",
    "matplotlib.pyplot",
    "sacrebleu",
    "sacremoses",
    "sentencepiece",
    "pytest",
    "xdist.plugin",
]


def fairseq_configuration() -> None:
    """Every fairseq CLI composes its configuration with hydra, imported on first use."""
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    parser = options.get_training_parser()
    convert_namespace_to_omegaconf(
        options.parse_args_and_arch(parser, ["data", "--arch", "transformer"])
    )


def compile_group(names: list) -> list:
    """Import NAMES; what failed, as lines for the user."""
    failed = []
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as err:  # a missing optional tool only costs its compile time
            failed.append(f"{name} ({type(err).__name__}: {err})")
    return failed


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--other-group"]:
        failed = compile_group(OTHER_GROUP)
    else:
        other = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--other-group"])
        failed = compile_group(FAIRSEQ_GROUP)
        try:
            fairseq_configuration()
        except Exception as err:
            failed.append(f"fairseq's configuration ({type(err).__name__}: {err})")
        other.wait()
    for line in failed:
        print(f"compile_bytecode: not compiled: {line}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
