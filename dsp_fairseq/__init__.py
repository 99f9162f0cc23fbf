"""dsp-fairseq: prune Transformer attention heads to exactly K, then remove them.

Importing this package (``--user-dir "$(dsp-user-dir)"``, ``--user-dir dsp_fairseq``
or ``import dsp_fairseq``) registers the ``transformer_dsp`` model and
architectures, the ``translation_dsp`` task (which trains the gates), the
``dsp_label_smoothed_cross_entropy`` criterion and the head gates, and lets
fairseq checkpoints load under torch's weights-only default.

The exceptions are the command-line tools (``dsp_fairseq.cli.*``), the recipes'
helpers (``python -m dsp_fairseq.recipes.*``), the plots (``python -m
dsp_fairseq.plots.report``, sweep.sh's figures: checkpoints read with torch) and the
pure-Python head layout (``dsp_fairseq.models.head_layout``, which the benchmark reports
import): importing a
tool must not pull torch and fairseq in before its arguments are parsed (a ``--help`` or
a mistyped option would otherwise wait ~3 s), the helpers need at most torch (fairseq's
import costs ~3-4 s per call here, and the recipes call them several times per row), and
a report that only reads result files needs neither, so the package defers registration
while one of them is being imported; each tool calls :func:`register` once its arguments
are valid. A process that imports one of them first and only then fairseq must call
:func:`register` itself before using the plugin through fairseq (fairseq's ``--user-dir``
skips a package that is already imported).
"""

import sys

__version__ = "0.1.0"

# A marker every checkpoint the plugin writes carries as its first entry (key PLUGIN_KEY).
# fairseq 0.12 never loads the plugin a checkpoint needs, and torch's weights-only
# unpickler names the first type it does not know: with this marker first, a stock
# `fairseq-generate` without --user-dir stops with "Unsupported global: GLOBAL
# dsp_fairseq.PLUGIN_NEEDED__..." (what to do) instead of "GLOBAL argparse.Namespace".
# It is a class with no behaviour; the plugin allowlists it (safe_loading).
PLUGIN_KEY = "dsp_fairseq_plugin"
PLUGIN_HINT = (
    "PLUGIN_NEEDED__load_with_fairseq_option_user_dir_set_to_output_of_command_dsp_user_dir"
)
globals()[PLUGIN_HINT] = type(
    PLUGIN_HINT,
    (),
    {
        "__module__": __name__,
        "__doc__": 'Load this checkpoint with fairseq --user-dir "$(dsp-user-dir)".',
    },
)

_registered = False


def register() -> None:
    """Register the model, criterion and gates with fairseq (idempotent)."""
    global _registered
    if _registered:
        return
    _registered = True
    from .safe_loading import allow_fairseq_checkpoint_types

    allow_fairseq_checkpoint_types()
    from . import criterions, gates, models, tasks  # noqa: F401  (registration)
    from .criterions import distillation, dsp_label_smoothed_cross_entropy  # noqa: F401
    from .models import transformer_dsp  # noqa: F401
    from .tasks import translation_dsp  # noqa: F401


_DEFERRING = tuple(f"{__name__}.{sub}" for sub in ("cli", "recipes", "plots", "models.head_layout"))


def _importing_a_cli() -> bool:
    """True when this package is being imported only as the parent of ``dsp_fairseq.cli``,
    ``dsp_fairseq.recipes``, ``dsp_fairseq.plots`` or ``dsp_fairseq.models.head_layout``.

    CPython's import system runs this ``__init__`` from ``_find_and_load(name, ...)``
    for the submodule that was asked for, so its frames say whether the import is
    ``dsp_fairseq.cli.<tool>`` (console scripts, ``python -m``), a recipe helper
    (``python -m dsp_fairseq.recipes.<helper>``) or the head layout. If the frames look
    different (another interpreter), this answers False and the package registers
    eagerly: slower ``--help``, never a missing registration.
    """
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name in ("_find_and_load", "_gcd_import"):
            name = frame.f_locals.get("name")
            if isinstance(name, str) and any(
                name == sub or name.startswith(sub + ".") for sub in _DEFERRING
            ):
                return True
        frame = frame.f_back
    return False


# Deferring only saves fairseq's import: where fairseq is loaded already (a script that
# imported it, a test process), register now, so that a later --user-dir, which skips a
# package already imported, still finds the plugin registered.
if "fairseq" in sys.modules or not _importing_a_cli():
    register()
