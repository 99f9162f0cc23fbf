"""Figures (matplotlib, PNG and SVG) for pruning runs.

* :mod:`.heads`: which heads a checkpoint keeps, layers x heads per attention type;
* :mod:`.gates`: how the gates evolve over training (checkpoints and/or JSON logs);
* :mod:`.sweep`: BLEU against heads kept, one line per method;
* :mod:`.report`: all of them for a folder written by examples/translation/sweep.sh.
"""
