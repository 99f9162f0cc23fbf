#!/usr/bin/env python3
"""CTranslate2 deployment benchmark: fairseq vs CTranslate2, unpruned vs pruned, float32 vs int8.

    python bench/ct2_bench.py --data work/converged/data --base BASE.pt --layout 4,4 \
        --out bench/ct2 --work work/ct2bench [--dsp-uniform DSP.pt] [--dsp-padded DSP.pt]

Models (all from --base, a trained stock transformer or unpruned transformer_dsp):
- unpruned;
- uniform layout ENC,DEC (--layout; ENC heads in every encoder self-attention, DEC in every
  decoder self- and cross-attention), heads chosen by head importance (Michel et al.,
  ``dsp-importance`` with --importance-args), by fairseq's weight
  magnitude (``_get_reserve_head_index``) and, with --dsp-uniform, by a DSP gate trained with
  ``--heads-per-attention ENC,DEC`` (its checkpoint, gated or stripped);
- padded: --dsp-padded, a DSP gate trained with a global K (uneven layout, exported with zero
  heads); without it, head importance at the same global K stands in (labelled so).
With --reconstruct every pruned model that carries no recovery yet (importance's and fairseq's
choices, a DSP gate stripped here) is refit by ``dsp-reconstruct`` before export; DSP models
from the recipes come with the recovery they chose (SAVE_DIR/recovery.json) and keep it. The
table names each model's recovery.

Engines, timed in turns, one at a time (round 0 is a warm-up; median over --reps rounds):
fairseq (``SequenceGenerator``, beam 5) on the unpruned and the stripped models in this
process, and CTranslate2 (``dsp-export-ct2``) on every model in float32 and int8, each
model and thread count in a torch-free worker process of its own, as deployed (see
``ct2_server``: a second OpenMP team in a process slows CTranslate2's 2-thread decoding), at batch 1 and 64 and
1 and 2 threads, on the first --sentences test sentences: free beam search and a
length-controlled one (every hypothesis exactly --fixed-steps tokens, batch 64).
Sentences/s, ms/token, peak RSS (a fresh process per engine decoding one batch of 64) and
BLEU (sacreBLEU, detokenized, the whole test split, batch 64, 2 threads). Writes OUT/ct2_bench.json,
OUT/ct2_bench.md and OUT/bleu_vs_speed.png.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from datetime import date

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)


BIN = os.path.dirname(sys.executable)
MAX_LEN = 200


def sh(*cmd, log=None):
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)
    if log:
        with open(log, "w") as f:
            f.write(proc.stdout + proc.stderr)
    if proc.returncode:
        raise RuntimeError(f"{cmd[0]} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return proc.stdout


# -- models ---------------------------------------------------------------------------


def prepare(args) -> list:
    """Stripped checkpoints and CTranslate2 folders of every model, cached in --work."""
    import speed_bench as sb

    from bench.common import fairseq_choice_at_layout
    from dsp_fairseq.checkpoint_io import save_checkpoint_atomic
    from dsp_fairseq.pruning.strip import strip_checkpoint

    w = args.work
    os.makedirs(w, exist_ok=True)
    enc, dec = (int(x) for x in args.layout.split(","))
    tag = f"{enc},{dec}"
    models = [{"name": "unpruned", "method": "unpruned", "layout": "all", "ckpt": args.base}]
    scores = args.importance or os.path.join(w, "importance.json")
    if not os.path.isfile(scores):
        print("  head importance", flush=True)
        sh("dsp-importance", "--path", args.base, "--data", os.path.join(args.data, "bin"),
           *args.importance_args.split(), "--cpu", "--output", scores)  # fmt: skip
    imp = os.path.join(w, "importance-uniform.pt")
    if not os.path.isfile(imp):
        sh("dsp-strip", "--input", args.base, "--output", imp, "--importance", scores,
           "--heads-per-attention", tag, log=imp + ".txt")  # fmt: skip
    models.append(
        {"name": "importance-uniform", "method": "importance", "layout": tag, "ckpt": imp}
    )
    fsq = os.path.join(w, "fairseq-uniform.pt")
    if not os.path.isfile(fsq):
        state, task, _ = sb.load_test_setup(args.base, os.path.join(args.data, "bin"))
        stock, _ = sb.build_variant(state, "stock", 0, task)
        new_state, _ = strip_checkpoint(state, kept=fairseq_choice_at_layout(stock, (enc, dec)))
        save_checkpoint_atomic(new_state, fsq)
        del stock
    models.append({"name": "fairseq-uniform", "method": "fairseq weight magnitude",
                   "layout": tag, "ckpt": fsq})  # fmt: skip
    if args.dsp_uniform:
        models.append({"name": "dsp-uniform", "method": "DSP", "layout": tag,
                       "ckpt": stripped(args.dsp_uniform, os.path.join(w, "dsp-uniform.pt"))})  # fmt: skip
    for i, ckpt in enumerate(x for x in (args.dsp_uniform_seeds or "").split(",") if x):
        # more seeds of the uniform DSP run: BLEU only (the seed spread of the head choice)
        models.append({"name": f"dsp-uniform-seed{i + 2}", "method": "DSP", "layout": tag,
                       "ckpt": stripped(ckpt, os.path.join(w, f"dsp-uniform-seed{i + 2}.pt")),
                       "bleu_only": True})  # fmt: skip
    if args.dsp_padded:
        models.append({"name": "dsp-padded", "method": "DSP", "layout": "padded",
                       "ckpt": stripped(args.dsp_padded, os.path.join(w, "dsp-padded.pt"))})  # fmt: skip
    else:
        from dsp_fairseq.checkpoint_io import load_checkpoint, model_args
        from dsp_fairseq.models.head_layout import parse_head_counts

        counts = parse_head_counts(model_args(load_checkpoint(imp)).stripped_heads)
        k = sum(sum(v) for v in counts.values())
        pad = os.path.join(w, "importance-padded.pt")
        if not os.path.isfile(pad):
            sh("dsp-strip", "--input", args.base, "--output", pad, "--importance", scores,
               "--heads-to-keep", k, log=pad + ".txt")  # fmt: skip
        models.append({"name": "importance-padded", "method": "importance (global K)",
                       "layout": "padded", "ckpt": pad})  # fmt: skip
    for m in models[1:]:
        m["recovery"] = recovery_of(m["ckpt"])
        if args.reconstruct and m["recovery"] == "none":
            rec = os.path.join(w, f"{m['name']}.rec.pt")
            if not os.path.isfile(rec):
                print(f"  reconstruct {m['name']}", flush=True)
                sh("dsp-reconstruct", "--pruned", m["ckpt"], "--base", args.base, "--data",
                   os.path.join(args.data, "bin"), "--output", rec, "--quiet", log=rec + ".txt")  # fmt: skip
            m["ckpt"], m["recovery"] = rec, "reconstruct"
    for m in models:
        for q in ("float32", "int8"):
            out = os.path.join(w, f"ct2-{m['name']}-{q}")
            if not os.path.isdir(out):
                extra = [] if q == "float32" else ["--quantization", q]
                sh("dsp-export-ct2", "--input", m["ckpt"], "--output", out, "--data",
                   os.path.join(args.data, "bin"), *extra, log=out + ".txt")  # fmt: skip
            m[f"ct2_{q}"] = out
        with open(m["ct2_float32"] + ".txt") as f:
            m["export_log"] = [ln for ln in f.read().splitlines() if not ln.startswith("INFO")]
    return models


def recovery_of(ckpt: str) -> str:
    """What recovered a stripped checkpoint: "reconstruct" (its ``dsp_reconstruction`` entry),
    the recipe's choice beside it (SAVE_DIR/recovery.json of prune-pipelined.sh's best: the
    gate run's own weights), or "none"."""
    from dsp_fairseq.checkpoint_io import load_checkpoint

    if load_checkpoint(ckpt).get("dsp_reconstruction"):
        return "reconstruct"
    beside = os.path.join(os.path.dirname(os.path.abspath(ckpt)), "recovery.json")
    if os.path.isfile(beside):
        with open(beside, encoding="utf-8") as f:
            chosen = json.load(f).get("chosen", "none")
        # best kept the gate run's own output layers over the refit
        return "own weights (best on valid)" if chosen == "none" else chosen
    return "none"


def stripped(ckpt: str, out: str) -> str:
    """A DSP checkpoint as given if stripped, else stripped with its gate into ``out``."""
    from dsp_fairseq.checkpoint_io import load_checkpoint, model_args

    if getattr(model_args(load_checkpoint(ckpt)), "stripped_heads", None):
        return ckpt
    if not os.path.isfile(out):
        sh("dsp-strip", "--input", ckpt, "--output", out, log=out + ".txt")
    return out


# -- engines ----------------------------------------------------------------------------


class FairseqEngine:
    def __init__(self, ckpt, data):
        import speed_bench as sb

        from dsp_fairseq.checkpoint_io import model_args

        self.state, self.task, self.ds = sb.load_test_setup(ckpt, data)
        margs = copy.copy(model_args(self.state))
        self.model = self.task.build_model(margs)
        weights = {k: v for k, v in self.state["model"].items() if not k.startswith("head_gate.")}
        if (
            getattr(margs, "gate_type", "none") != "none"
            and "head_gate.logits" in self.state["model"]
        ):
            weights = self.state["model"]
        self.model.load_state_dict(weights, strict=True)
        self.model.eval()

    def sources(self, n):
        return [
            self.task.source_dictionary.string(self.ds[i]["source"][:-1]).split()
            for i in range(min(n, len(self.ds)))
        ]

    def decode(self, n, batch, threads, fixed=0):
        import torch
        from fairseq.sequence_generator import SequenceGenerator

        torch.set_num_threads(threads)
        gen = SequenceGenerator([self.model], self.task.target_dictionary, beam_size=5,
                                max_len_a=0, max_len_b=fixed or MAX_LEN, min_len=fixed or 1)  # fmt: skip
        ids = list(range(min(n, len(self.ds))))
        hyps = {}
        with torch.inference_mode():
            for j in range(0, len(ids), batch):
                b = self.ds.collater([self.ds[i] for i in ids[j : j + batch]])
                for sid, h in zip(b["id"].tolist(), gen.generate([self.model], b)):
                    hyps[sid] = self.task.target_dictionary.string(h[0]["tokens"]).split()
        return [hyps[i] for i in ids]


def ct2_server(conn, model_dir: str, threads: int) -> None:
    """Serve decoding requests for one CTranslate2 model at one thread count, in a process of
    its own that never runs torch.

    Measured here (2 cores): once a process has run a second OpenMP team (torch's, or a second
    CTranslate2 translator's with 2 intra-op threads, even after the first is deleted), GNU
    OpenMP sees more threads than CPUs and stops spinning at barriers, and CTranslate2 at 2
    threads runs 5-8x slower than at 1. A deployed model has one translator per process;
    so does each engine here.
    """

    translator = None
    while True:
        msg = conn.recv()
        if msg is None:
            return
        sources, batch, fixed = msg
        try:
            if translator is None:
                translator = open_translator(model_dir, threads)
            conn.send(("ok", translate(translator, sources, batch, fixed)))
        except Exception as e:  # the parent raises it with the model's name
            conn.send(("error", f"{type(e).__name__}: {e}"))


class CT2Server:
    """A spawned (so torch-free) worker process holding one translator. The benchmark
    process waits while it decodes, so engines still run in turns, one at a time."""

    def __init__(self, model_dir: str, threads: int):
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=ct2_server, args=(child, model_dir, threads), daemon=True)
        self.proc.start()
        self.model_dir = model_dir

    def translate(self, sources, batch, fixed):
        self.conn.send((sources, batch, fixed))
        status, out = self.conn.recv()
        if status != "ok":
            raise RuntimeError(f"CTranslate2 on {self.model_dir}: {out}")
        return out

    def close(self):
        self.conn.send(None)
        self.proc.join(timeout=30)


class CT2Engine:
    """A CTranslate2 model: one worker process per thread count (``spawn``), or in this
    process (``spawn=False``: the peak-RSS worker, which decodes once)."""

    def __init__(self, model_dir, spawn=True):
        self.model_dir = model_dir
        self.spawn = spawn
        self.servers = {}

    def decode_tokens(self, sources, batch, threads, fixed=0):
        if self.spawn:
            if threads not in self.servers:
                self.servers[threads] = CT2Server(self.model_dir, threads)
            return self.servers[threads].translate(sources, batch, fixed)
        return translate(open_translator(self.model_dir, threads), sources, batch, fixed)

    def close(self):
        for server in self.servers.values():
            server.close()


def open_translator(model_dir: str, threads: int):
    """One CPU translator with ``threads`` intra-op threads (one batch at a time)."""
    import ctranslate2

    return ctranslate2.Translator(model_dir, device="cpu", inter_threads=1, intra_threads=threads)


def translate(translator, sources, batch, fixed=0) -> list:
    """Beam 5, fairseq-generate's length limit (or exactly ``fixed`` tokens): best hypotheses."""
    res = translator.translate_batch(
        sources, beam_size=5, max_batch_size=batch,
        max_decoding_length=fixed or MAX_LEN, min_decoding_length=fixed or 1,
    )  # fmt: skip
    return [r.hypotheses[0] for r in res]


def run_engine(engine, sources, n, batch, threads, fixed=0):
    if isinstance(engine, FairseqEngine):
        return engine.decode(n, batch, threads, fixed)
    return engine.decode_tokens(sources[:n], batch, threads, fixed)


def peak_rss_worker(cfg) -> dict:
    """Peak RSS of one engine decoding one batch, in a fresh process."""
    sys.path.insert(0, ROOT)
    if cfg["kind"] == "fairseq":
        import speed_bench as sb

        from bench.common import quiet_fairseq

        sb._plugin()
        quiet_fairseq()
        engine = FairseqEngine(cfg["path"], cfg["data"])
        engine.decode(cfg["batch"], cfg["batch"], cfg["threads"])
    else:
        engine = CT2Engine(cfg["path"], spawn=False)
        engine.decode_tokens(cfg["sources"], cfg["batch"], cfg["threads"])
    from bench.common import peak_rss_mb  # after sys.path has the repository

    return {"peak_rss_mb": peak_rss_mb()}


def peak_rss(cfg) -> float:
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", json.dumps(cfg)], capture_output=True, text=True
    )
    if proc.returncode:
        raise RuntimeError(f"worker failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])["peak_rss_mb"]


# -- measuring ---------------------------------------------------------------------------


def bleu(hyps, spm, refs) -> float:
    import sacrebleu

    return round(sacrebleu.corpus_bleu([spm.decode(h) for h in hyps], [refs]).score, 2)


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--data", help="prepared corpus folder (bin/, spm/spm.model, raw/test.en)")
    p.add_argument("--base", help="trained unpruned checkpoint")
    p.add_argument("--layout", default="4,4", help="uniform layout ENC,DEC")
    p.add_argument("--importance", help="dsp-importance scores of --base (default: computed)")
    p.add_argument("--importance-args", default="--max-batches 10", help="dsp-importance options")
    p.add_argument("--dsp-uniform", help="DSP checkpoint trained with --heads-per-attention")
    p.add_argument(
        "--dsp-uniform-seeds",
        help="comma-separated DSP checkpoints of the same layout with other seeds: BLEU only",
    )
    p.add_argument("--dsp-padded", help="DSP checkpoint trained with a global --heads-to-keep")
    p.add_argument(
        "--reconstruct",
        action="store_true",
        help="refit every pruned model without a recovery (dsp-reconstruct) before export",
    )
    p.add_argument("--out", default=os.path.join(HERE, "ct2"))
    p.add_argument("--work", default=os.path.join(ROOT, "work", "ct2bench"))
    p.add_argument("--sentences", type=int, default=64, help="test sentences timed")
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--batches", default="1,64")
    p.add_argument("--fixed-steps", type=int, default=20)
    p.add_argument("--bleu-sentences", type=int, default=0, help="0: the whole test split")
    p.add_argument(
        "--report", metavar="JSON", help="only remake OUT's table and plot from a result"
    )
    args = p.parse_args()
    if args.worker:
        print(json.dumps(peak_rss_worker(json.loads(args.worker))))
        return 0
    if args.report:
        with open(args.report, encoding="utf-8") as f:
            result = json.load(f)
        write_outputs(result, args.out)
        return 0
    if not (args.data and args.base):
        p.error("--data and --base are required")
    import sentencepiece
    import speed_bench as sb

    from bench.common import machine, quiet_fairseq

    sb._plugin()
    quiet_fairseq()
    start = time.time()
    bin_dir = os.path.join(args.data, "bin")
    spm = sentencepiece.SentencePieceProcessor(model_file=os.path.join(args.data, "spm/spm.model"))
    with open(os.path.join(args.data, "raw/test.en"), encoding="utf-8") as f:
        refs = [line.rstrip("\n") for line in f]
    models = prepare(args)
    by_name = {m["name"]: m for m in models}
    fs_stripped = "dsp-uniform" if "dsp-uniform" in by_name else "importance-uniform"
    engines = {
        ("fairseq", "unpruned", "float32"): FairseqEngine(args.base, bin_dir),
        ("fairseq", fs_stripped, "float32"): FairseqEngine(by_name[fs_stripped]["ckpt"], bin_dir),
    }
    bleu_only = {m["name"] for m in models if m.get("bleu_only")}
    for m in models:
        for q in ("float32", "int8"):
            engines[("ct2", m["name"], q)] = CT2Engine(m[f"ct2_{q}"])
    timed = {k: e for k, e in engines.items() if k[1] not in bleu_only}
    ref_engine = engines[("fairseq", "unpruned", "float32")]
    n_all = len(ref_engine.ds) if not args.bleu_sentences else args.bleu_sentences
    sources = ref_engine.sources(n_all)
    refs = refs[:n_all]

    # quality: the whole test split, batch 64, 2 threads
    print(f"  BLEU on {n_all} sentences, {len(engines)} engines", flush=True)
    quality, hyps_all = {}, {}
    for key, engine in engines.items():
        t0 = time.time()
        hyps = run_engine(engine, sources, n_all, 64, 2)
        hyps_all[key] = hyps
        quality[key] = {"bleu": bleu(hyps, spm, refs), "bleu_seconds": round(time.time() - t0, 1)}
        print(f"    {key}: BLEU {quality[key]['bleu']}", flush=True)
    # identical translations of CTranslate2 float32 vs fairseq, same stripped model
    agreement = {}
    for name in ("unpruned", fs_stripped):
        a, b = hyps_all[("ct2", name, "float32")], hyps_all[("fairseq", name, "float32")]
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        agreement[name] = {
            "identical": len(a) - len(diff),
            "of": len(a),
            "differ_at_length_limit": sum(len(a[i]) >= MAX_LEN for i in diff),
            "examples": [{"id": i, "ct2": " ".join(a[i]), "fairseq": " ".join(b[i])}
                         for i in diff[:5]],
        }  # fmt: skip
        q8 = hyps_all[("ct2", name, "int8")]
        agreement[name]["int8_identical_to_float32"] = sum(x == y for x, y in zip(q8, a))

    # speed: engines in turns
    rows = []
    settings = [(b, t, 0) for b in map(int, args.batches.split(",")) for t in map(int, args.threads.split(","))]  # fmt: skip
    settings += [(64, t, args.fixed_steps) for t in map(int, args.threads.split(","))]
    for batch, threads, fixed in settings:
        print(f"  batch {batch}, {threads} threads, {'fixed ' + str(fixed) if fixed else 'free'}:"
              f" {len(timed)} engines in turns, {args.reps} rounds + warm-up", flush=True)  # fmt: skip
        secs = {k: [] for k in timed}
        last = {}
        for rnd in range(args.reps + 1):
            for key, engine in timed.items():
                t0 = time.perf_counter()
                hyps = run_engine(engine, sources, args.sentences, batch, threads, fixed)
                dt = time.perf_counter() - t0
                if rnd:
                    secs[key].append(dt)
                last[key] = hyps
        for key in timed:
            n = len(last[key])
            tokens = sum(len(h) + 1 for h in last[key])  # + end of sentence
            med = statistics.median(secs[key])
            rows.append({"engine": key[0], "model": key[1], "precision": key[2], "batch": batch,
                         "threads": threads, "fixed_steps": fixed, "seconds": secs[key],
                         "sentences": n, "tokens": tokens, "sentences_per_s": n / med,
                         "ms_per_token": 1000 * med / tokens})  # fmt: skip
    for engine in engines.values():
        if isinstance(engine, CT2Engine):
            engine.close()
    print("  peak RSS", flush=True)
    rss = {}
    for key in timed:
        path = (by_name[key[1]]["ckpt"] if key[0] == "fairseq" else by_name[key[1]][f"ct2_{key[2]}"])  # fmt: skip
        cfg = {"kind": key[0], "path": path, "data": bin_dir, "batch": 64, "threads": 2,
               "sources": sources[:64]}  # fmt: skip
        rss["/".join(key)] = peak_rss(cfg)
    result = {
        "date": date.today().isoformat(),
        "machine": machine(2),
        "command": "python " + shlex.join(sys.argv),
        "models": [{k: v for k, v in m.items()} for m in models],
        "quality": {"/".join(k): v for k, v in quality.items()},
        "agreement": agreement,
        "rows": rows,
        "peak_rss_mb": rss,
        "wall_seconds": round(time.time() - start),
    }
    write_outputs(result, args.out)
    return 0


def write_outputs(result: dict, out: str) -> None:
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "ct2_bench.json"), "w") as f:
        json.dump(result, f, indent=1)
    table = render(result)
    with open(os.path.join(out, "ct2_bench.md"), "w") as f:
        f.write(table)
    plot(result, os.path.join(out, "bleu_vs_speed.png"))
    print(table)


LABEL = {
    "unpruned": "unpruned",
    "dsp-uniform": "DSP, uniform",
    "importance-uniform": "importance, uniform",
    "fairseq-uniform": "fairseq's choice, uniform",
    "dsp-padded": "DSP, padded",
    "importance-padded": "importance (global K), padded",
}


def label(result, name: str) -> str:
    """A model's label, with the recovery it got when it got one."""
    rec = next((m.get("recovery", "none") for m in result["models"] if m["name"] == name), "none")
    return LABEL.get(name, name) + ("" if rec == "none" else f" + {rec}")


def render(result) -> str:
    models = {m["name"]: m for m in result["models"]}
    rows = result["rows"]
    base = {
        (r["batch"], r["threads"], r["fixed_steps"]): r
        for r in rows
        if r["engine"] == "fairseq" and r["model"] == "unpruned"
    }
    lines = [f"Machine: {result['machine']}. Date: {result['date']}.", "",
             f"Command: `{result['command']}`", ""]  # fmt: skip
    lines.append("Heads per model (CTranslate2 export; `kept(written)`):")
    lines.append("")
    for name, m in models.items():
        log = [ln for ln in m.get("export_log", []) if ln.startswith(("enc-self", "dec-self", "cross", "uniform", "padded", "cost"))]  # fmt: skip
        lines.append(f"- {label(result, name)} ({m['layout']}): " + "; ".join(log))
    lines.append("")
    keys = []
    for r in rows:
        k = (r["engine"], r["model"], r["precision"])
        if k not in keys:
            keys.append(k)
    settings = sorted({(r["batch"], r["threads"], r["fixed_steps"]) for r in rows})
    head = "| engine | model | layout | precision | BLEU | peak RSS MB | " + " | ".join(
        f"b{b} t{t}{' fixed' if f else ''} sent/s (x fairseq) | ms/tok" for b, t, f in settings
    )
    lines += [head + " |", "|" + "---|" * (6 + 2 * len(settings))]
    for k in keys:
        cells = [k[0] if k[0] == "fairseq" else "CTranslate2", label(result, k[1]),
                 models[k[1]]["layout"], k[2], f"{result['quality']['/'.join(k)]['bleu']:.2f}",
                 f"{result['peak_rss_mb']['/'.join(k)]:.0f}"]  # fmt: skip
        for s in settings:
            r = next(r for r in rows if (r["engine"], r["model"], r["precision"]) == k
                     and (r["batch"], r["threads"], r["fixed_steps"]) == s)  # fmt: skip
            ratio = r["sentences_per_s"] / base[s]["sentences_per_s"]
            cells += [f"{r['sentences_per_s']:.1f} ({ratio:.2f}x)", f"{r['ms_per_token']:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for name, a in result["agreement"].items():
        lines.append(
            f"- CTranslate2 float32 vs fairseq, {label(result, name)}: {a['identical']}/{a['of']} "
            f"identical translations ({a['differ_at_length_limit']} of the differences at the "
            f"{MAX_LEN}-token limit); int8 vs float32: {a['int8_identical_to_float32']}/{a['of']}"
        )
    lines.append(f"- wall time of the command: {result['wall_seconds'] / 60:.1f} min")
    lines += ["", *choice_lines(result), "", *goal_lines(result)]
    return "\n".join(lines) + "\n"


def dsp_seed_bleus(result, precision: str) -> list:
    q = result["quality"]
    return [q[f"ct2/{m['name']}/{precision}"]["bleu"] for m in result["models"]
            if m["name"] == "dsp-uniform" or m["name"].startswith("dsp-uniform-seed")]  # fmt: skip


def spread(xs: list) -> str:
    if len(xs) < 2:
        return f"{xs[0]:.2f} (1 seed)"
    return (
        f"{statistics.mean(xs):.2f} ± {statistics.stdev(xs):.2f} (sd, {len(xs)} seeds: "
        + ", ".join(f"{x:.2f}" for x in xs)
        + ")"
    )


def choice_lines(result) -> list:
    """Which heads to keep at the same uniform layout: DSP (every seed) vs importance vs fairseq."""
    q = result["quality"]
    uni = [m for m in result["models"] if m["layout"] not in ("all", "padded")]
    if not uni:
        return []
    lines = [f"Head choice at the uniform layout {uni[0]['layout']} (sacreBLEU on the whole test "
             "split, CTranslate2):", "", "| choice | float32 | int8 |", "|---|---|---|"]  # fmt: skip
    if dsp_seed_bleus(result, "float32"):
        recs = sorted({m.get("recovery", "none") for m in uni if m["name"].startswith("dsp-")})
        dsp = "DSP" + ("" if recs == ["none"] else " + " + " or ".join(recs))
        lines.append(f"| {dsp} | {spread(dsp_seed_bleus(result, 'float32'))} | "
                     f"{spread(dsp_seed_bleus(result, 'int8'))} |")  # fmt: skip
    for name in ("importance-uniform", "fairseq-uniform"):
        if f"ct2/{name}/float32" in q:
            lines.append(f"| {label(result, name)} | {q[f'ct2/{name}/float32']['bleu']:.2f} | "
                         f"{q[f'ct2/{name}/int8']['bleu']:.2f} |")  # fmt: skip
    return lines


def goal_lines(result) -> list:
    """The issue's goals, measured: met or not, with the numbers."""
    q, rows = result["quality"], result["rows"]

    def sps(engine, model, precision, batch=64, threads=2):
        for r in rows:
            if (r["engine"], r["model"], r["precision"], r["batch"], r["threads"], r["fixed_steps"]) == (engine, model, precision, batch, threads, 0):  # fmt: skip
                return r["sentences_per_s"]
        return None

    def verdict(ok: bool) -> str:
        return "met" if ok else "NOT met"

    out = ["Goals:"]
    for name, a in result["agreement"].items():
        if name == "unpruned":
            continue
        d = abs(q[f"ct2/{name}/float32"]["bleu"] - q[f"fairseq/{name}/float32"]["bleu"])
        share = a["identical"] / a["of"]
        out.append(f"- CTranslate2 float32 = fairseq stripped ({label(result, name)}): "
                   f"{100 * share:.1f}% identical, BLEU differs by {d:.2f}: "
                   f"{verdict(share >= 0.99 and d <= 0.1)} (>= 99%, <= 0.1)")  # fmt: skip
        base = sps("fairseq", "unpruned", "float32")
        fast = sps("ct2", name, "int8")
        if base and fast:
            drop = q[f"fairseq/{name}/float32"]["bleu"] - q[f"ct2/{name}/int8"]["bleu"]
            out.append(f"- CTranslate2 int8 {label(result, name)}: {fast / base:.2f}x the "
                       f"sentences/s of unpruned fairseq (batch 64, 2 threads), {drop:.2f} BLEU "
                       f"below the fairseq stripped model: {verdict(fast / base >= 3 and drop <= 0.5)}"
                       " (>= 3x, <= 0.5)")  # fmt: skip
            # the same cores, each engine at its faster thread count (1 or 2)
            best = {e: max((sps(e, m, p, 64, t) or 0, t) for t in (1, 2))
                    for e, m, p in (("fairseq", "unpruned", "float32"), ("ct2", name, "int8"))}  # fmt: skip
            (f_sps, f_t), (c_sps, c_t) = best["fairseq"], best["ct2"]
            if f_sps and c_sps:
                out.append(f"  - each engine at its faster thread count on the same 2 cores (batch 64): "
                           f"CTranslate2 int8 at {c_t} thread(s) {c_sps:.1f} sentences/s vs fairseq "
                           f"at {f_t} {f_sps:.1f}: {c_sps / f_sps:.2f}x")  # fmt: skip
    dsp = dsp_seed_bleus(result, "float32")
    rivals = {n: q[f"ct2/{n}/float32"]["bleu"] for n in ("importance-uniform", "fairseq-uniform")
              if f"ct2/{n}/float32" in q}  # fmt: skip
    if dsp and rivals:
        best_name, best = max(rivals.items(), key=lambda kv: kv[1])
        gap = statistics.mean(dsp) - best
        if len(dsp) > 1:
            sd = statistics.stdev(dsp)
            spread, ok = f"the mean of {len(dsp)} seeds, seed sd {sd:.2f}", gap > sd
        else:  # one seed has no spread to beat: no claim
            spread, ok = "one seed (no spread: pass --dsp-uniform-seeds)", False
        out.append(f"- DSP's head choice vs the best other choice at the same layout "
                   f"({label(result, best_name)}, {best:.2f}): DSP {gap:+.2f} BLEU on {spread}: "
                   f"{verdict(ok)} (a gap larger than the sd)")  # fmt: skip
    return out


CT2_TITLE = "Converged 72-head Transformer, Multi30k De-En test: sacreBLEU against decoding speed"


def plot(result, path) -> None:
    """BLEU against sentences/s (beam 5, batch 64, free decoding), one panel per thread count.

    Colour: the model (which heads, which layout); marker: engine and precision. Both are
    explained in legends beside the panels (the points carried only unexplained colours).
    """
    from dsp_fairseq.plots.common import SERIES_COLORS, plt

    threads = sorted({r["threads"] for r in result["rows"]})
    shown = [r for r in result["rows"] if r["batch"] == 64 and r["fixed_steps"] == 0]
    models = [m["name"] for m in result["models"] if any(r["model"] == m["name"] for r in shown)]
    colour = {name: SERIES_COLORS[i % len(SERIES_COLORS)] for i, name in enumerate(models)}
    kinds = {("fairseq", "float32"): ("s", "fairseq, float32"),
             ("ct2", "float32"): ("o", "CTranslate2, float32"),
             ("ct2", "int8"): ("^", "CTranslate2, int8")}  # fmt: skip
    fig, axes = plt.subplots(
        1, len(threads), figsize=(5.2 * len(threads) + 2.6, 4.4), squeeze=False,
        sharey=True, layout="constrained",
    )  # fmt: skip
    for ax, t in zip(axes[0], threads):
        for r in shown:
            if r["threads"] != t:
                continue
            key = "/".join((r["engine"], r["model"], r["precision"]))
            marker, _ = kinds.get((r["engine"], r["precision"]), ("x", ""))
            ax.plot(r["sentences_per_s"], result["quality"][key]["bleu"], marker=marker,
                    linestyle="none", markersize=8, color=colour[r["model"]],
                    markeredgecolor="black", markeredgewidth=0.4)  # fmt: skip
        ax.set_xlabel(f"sentences/s (beam 5, batch 64, {t} thread{'s' if t > 1 else ''})")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("sacreBLEU (test_2016)")
    model_handles = [
        plt.Line2D([], [], color=colour[n], marker="o", linestyle="none", label=label(result, n))
        for n in models
    ]
    used = {(r["engine"], r["precision"]) for r in shown}
    kind_handles = [
        plt.Line2D([], [], color="dimgray", marker=m, linestyle="none", label=label)
        for k, (m, label) in kinds.items()
        if k in used
    ]
    fig.legend(handles=model_handles, loc="outside right upper", fontsize=8,
               title="model (heads, layout)", title_fontsize=8)  # fmt: skip
    fig.legend(handles=kind_handles, loc="outside right lower", fontsize=8,
               title="engine, precision", title_fontsize=8)  # fmt: skip
    fig.suptitle(f"{CT2_TITLE} ({result['machine'].split(';')[0]} CPU)", fontsize=10)
    fig.savefig(path, dpi=130)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
