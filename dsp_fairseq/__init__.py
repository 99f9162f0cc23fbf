"""dsp-fairseq: prune Transformer attention heads to exactly K, then remove them.

Importing this package (``--user-dir dsp_fairseq`` or ``import dsp_fairseq``)
registers the ``transformer_dsp`` model and architectures, the
``dsp_label_smoothed_cross_entropy`` criterion and the head gates, and lets
fairseq checkpoints load under torch's weights-only default.
"""

from .safe_loading import allow_fairseq_checkpoint_types

allow_fairseq_checkpoint_types()
# The gate's optimizer step hook is installed when a gate is built, not here.

from . import criterions, gates, models  # noqa: E402,F401  (registration)
from .criterions import dsp_label_smoothed_cross_entropy  # noqa: E402,F401
from .models import transformer_dsp  # noqa: E402,F401

__version__ = "0.1.0"
