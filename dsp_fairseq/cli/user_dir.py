"""dsp-user-dir: print the folder of the installed plugin, for fairseq's --user-dir.

    fairseq-generate DATA --user-dir "$(dsp-user-dir)" --path checkpoints/pruned.pt ...

fairseq imports a plugin from a folder path (``--user-dir``); ``--user-dir dsp_fairseq``
works only from the repository root. This prints the absolute path of the
``dsp_fairseq`` package that this environment imports, from any folder, without
importing torch or fairseq.
"""

from __future__ import annotations

import argparse
import os
import sys


def plugin_folder() -> str:
    # The package __init__ defers torch/fairseq while a dsp_fairseq.cli module imports it.
    import dsp_fairseq

    return os.path.dirname(os.path.abspath(dsp_fairseq.__file__))


def main(argv=None) -> int:
    argparse.ArgumentParser(
        prog="dsp-user-dir",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    ).parse_args(argv)
    print(plugin_folder())
    return 0


if __name__ == "__main__":
    sys.exit(main())
