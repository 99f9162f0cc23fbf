"""The plugin's and fairseq's command-line entry functions, called in the test process.

Every subprocess that starts fairseq pays ~5 s of interpreter start-up and imports (torch,
fairseq's registries, scikit-learn through fairseq's criteria) on these machines, most of
the suite's time. Tests whose subject is a command's behaviour, not its console script,
call the same entry function here instead (``dsp_fairseq.cli.*.main``,
``fairseq_cli.generate.main``, ``fairseq_cli.validate.main``); every console script is
still started as a real subprocess somewhere (test_cli_inputs.py, the recipes' tests).
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
from typing import Callable, List, Tuple

import torch


@contextlib.contextmanager
def one_thread():
    """One intra-op thread, as the subprocesses get (OMP_NUM_THREADS=1)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def fairseq_log_handler(stream) -> logging.Handler:
    """A handler writing to STREAM in fairseq's CLI log format (its logging.basicConfig)."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        logging.Formatter(
            "%(asctime)s | %(levelname)s | %(name)s | %(message)s", datefmt="%Y-%m-%d %H:%M:%S"
        )
    )
    return handler


@contextlib.contextmanager
def root_logger_restored():
    """The root logger's handlers and level as they were, whatever the block did to them
    (fairseq's entry points replace or add handlers)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield root
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)


@contextlib.contextmanager
def captured_logs():
    """Text of every log record in fairseq's own format (what its CLIs print)."""
    buf = io.StringIO()
    with root_logger_restored() as root:
        root.addHandler(fairseq_log_handler(buf))
        root.setLevel(logging.INFO)
        yield buf


def call_cli(main: Callable, *argv) -> Tuple[int, str, str]:
    """Run a CLI entry function in-process: (exit code, stdout, stderr). Log records
    (fairseq's INFO lines, which the console scripts print on stderr) go to stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), one_thread():
        with captured_logs() as logs:
            try:
                code = main([str(a) for a in argv])
            except SystemExit as exc:  # argparse usage errors, parser.error
                code = exc.code
    return code or 0, out.getvalue(), err.getvalue() + logs.getvalue()


def cli_ok(main: Callable, *argv) -> Tuple[str, str]:
    """call_cli that must succeed: (stdout, stderr)."""
    code, out, err = call_cli(main, *argv)
    assert code == 0, f"exit {code}:\n{out[-3000:]}\n{err[-3000:]}"
    return out, err


def fairseq_validate(argv: List[str]) -> str:
    """fairseq-validate's main() on ARGV (as its cli_main calls it): the validation loss it
    logged last, as printed."""
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq_cli import validate

    argv = [str(a) for a in argv]
    args = options.parse_args_and_arch(options.get_validation_parser(), argv)
    override = options.parse_args_and_arch(
        options.get_validation_parser(), argv, suppress_defaults=True
    )
    out = io.StringIO()
    # validate.main() points the root logger at sys.stdout (fairseq's reset_logging)
    with root_logger_restored(), contextlib.redirect_stdout(out), one_thread():
        with data_loading_stopped():
            validate.main(convert_namespace_to_omegaconf(args), override)
    found = re.findall(r"valid on '[^']+' subset \| loss ([0-9.]+)", out.getvalue())
    assert found, out.getvalue()[-3000:]
    return found[-1]


def fairseq_generate(argv: List[str]) -> str:
    """fairseq-generate's main() on ARGV: what it prints on stdout (S-/H-/P-/A- lines)."""
    from fairseq import options
    from fairseq_cli import generate

    args = options.parse_args_and_arch(options.get_generation_parser(), [str(a) for a in argv])
    out = io.StringIO()
    with contextlib.redirect_stdout(out), one_thread(), data_loading_stopped():
        generate.main(args)
    return out.getvalue()


def fairseq_train(argv: List[str]) -> str:
    """fairseq-train on ARGV in this process, as its cli_main runs it (one CPU process:
    ``distributed_utils.call_main`` calls ``train.main``): what ``fairseq-train --log-format
    simple`` prints, log records in fairseq's format (its logging.basicConfig: stdout,
    '%(asctime)s | %(levelname)s | %(name)s | %(message)s') interleaved with anything
    printed, then stderr. A failed run raises AssertionError with the tails of both.

    The process-wide state a training run changes is put back afterwards, so that a run
    leaves no more trace in the test process than a subprocess: the root logger's handlers
    and level, the torch, numpy and Python RNG states (train.main seeds torch and numpy
    from --seed), the intra-op threads (one, as OMP_NUM_THREADS=1 gives the subprocesses),
    a --log-file handler, the data loading a run leaves running (``data_loading_stopped``),
    and the function attributes in which fairseq carries the best validation loss and the
    patience count from run to run (``checkpoint_utils.save_checkpoint.best``,
    ``train.should_stop_early.best`` and ``.num_runs``: absent during the run, as in a fresh
    process). fairseq's metrics aggregators are reset before the run (train.main does it
    too) and after it.
    """
    import os
    import random

    import numpy as np

    rng = torch.random.get_rng_state(), np.random.get_state(), random.getstate()
    out, err = io.StringIO(), io.StringIO()
    carried, saved, train_logger, train_handlers, metrics = [], {}, None, [], None
    with root_logger_restored() as root:
        try:
            from fairseq import checkpoint_utils, options
            from fairseq.dataclass.utils import convert_namespace_to_omegaconf
            from fairseq.distributed import utils as distributed_utils
            from fairseq.logging import metrics
            from fairseq_cli import train  # its first import calls logging.basicConfig

            stop = train.should_stop_early
            carried = [
                (checkpoint_utils.save_checkpoint, "best"),
                (stop, "best"),
                (stop, "num_runs"),
            ]
            for owner, name in carried:
                if hasattr(owner, name):
                    saved[owner, name] = getattr(owner, name)
                    delattr(owner, name)
            train_logger, train_handlers = train.logger, list(train.logger.handlers)
            metrics.reset()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), one_thread():
                # fairseq_cli/train.py's logging.basicConfig, which is a no-op here (pytest's
                # handlers are on the root logger) and bound to the real stdout in any case.
                root.addHandler(fairseq_log_handler(out))
                root.setLevel(os.environ.get("LOGLEVEL", "INFO").upper())
                try:
                    parser = options.get_training_parser()
                    args = options.parse_args_and_arch(parser, [str(a) for a in argv])
                    with data_loading_stopped():
                        distributed_utils.call_main(
                            convert_namespace_to_omegaconf(args), train.main
                        )
                except (Exception, SystemExit) as exc:  # SystemExit: argparse usage errors
                    raise AssertionError(
                        f"fairseq-train failed ({exc!r}):\n"
                        f"{out.getvalue()[-3000:]}\n{err.getvalue()[-3000:]}"
                    ) from exc
            return out.getvalue() + err.getvalue()
        finally:
            if metrics is not None:
                metrics.reset()
            for owner, name in carried:
                if hasattr(owner, name):
                    delattr(owner, name)
            for (owner, name), value in saved.items():
                setattr(owner, name, value)
            if train_logger is not None:
                for extra in [h for h in train_logger.handlers if h not in train_handlers]:
                    train_logger.removeHandler(extra)
                    extra.close()
            torch.random.set_rng_state(rng[0])
            np.random.set_state(rng[1])
            random.setstate(rng[2])


@contextlib.contextmanager
def data_loading_stopped():
    """Stop, on leaving, the data loading that fairseq entry functions called inside leave
    running in this process; a subprocess's exit ends it, here it would linger.

    fairseq's BufferedIterator reads each epoch's batches in a BackgroundConsumer thread,
    from a torch DataLoader that forks --num-workers worker processes. A training run that
    stops mid-epoch (--max-update) leaves the thread blocked on its full queue and so the
    loader's worker alive for good. A loader the thread has finished with is freed by the
    cyclic garbage collector, which closes the loader's index queues (their multiprocessing
    finalizers) before the loader's ``__del__`` sends its workers the stop message through
    them: the worker never hears it, and ``__del__`` waits 5 s (torch's
    MP_STATUS_CHECK_INTERVAL) before killing it, in whatever code next triggers a collection.
    Here each new consumer thread is told to stop after the batch it holds and its queue
    drained until it ends, and each loader with a worker started inside is shut down
    (``_shutdown_workers``: the stop message, then a join) while its queues are open.
    """
    import gc
    import multiprocessing
    import queue
    import threading
    import time

    threads, children = set(threading.enumerate()), set(multiprocessing.active_children())
    try:
        yield
    finally:
        from fairseq.data.iterators import BackgroundConsumer
        from torch.utils.data.dataloader import _MultiProcessingDataLoaderIter

        for thread in set(threading.enumerate()) - threads:
            if isinstance(thread, BackgroundConsumer):
                thread._max_len = 0  # its loop ends after the put it is blocked in
                deadline = time.monotonic() + 60
                while thread.is_alive() and time.monotonic() < deadline:
                    with contextlib.suppress(queue.Empty):
                        while True:
                            thread._queue.get_nowait()
                    thread.join(0.05)
        started = set(multiprocessing.active_children()) - children
        if started:
            for obj in gc.get_objects():
                if isinstance(obj, _MultiProcessingDataLoaderIter) and started & set(obj._workers):
                    obj._shutdown_workers()
