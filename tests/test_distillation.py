"""The distillation criterion (dsp_distillation) against fairseq's label-smoothed CE."""

import copy

import pytest
import torch
from fairseq.criterions.label_smoothed_cross_entropy import LabelSmoothedCrossEntropyCriterion
from robustness_helpers import checkpoint_state
from train_helpers import batch, fairseq_cfg, tiny_task

from dsp_fairseq.checkpoint_io import save_checkpoint_atomic
from dsp_fairseq.criterions.distillation import (
    DSPDistillationCriterion,
    distillation_kl,
    hidden_state_distance,
)


def _criterion(task, teacher_path, weight, temperature=1.0, smoothing=0.1, hidden=0.0):
    cfg = fairseq_cfg(
        "--criterion", "dsp_distillation", "--teacher", str(teacher_path),
        "--distill-weight", str(weight), "--distill-temperature", str(temperature),
        "--label-smoothing", str(smoothing), "--max-update", "10",
        "--distill-hidden-weight", str(hidden),
    )  # fmt: skip
    return DSPDistillationCriterion.build_criterion(cfg.criterion, task), cfg


@pytest.fixture
def setup(tmp_path):
    torch.manual_seed(0)
    task = tiny_task()
    cfg = fairseq_cfg()
    teacher = task.build_model(cfg.model)
    path = tmp_path / "teacher.pt"
    save_checkpoint_atomic(checkpoint_state(teacher, copy.copy(cfg.model)), str(path))
    torch.manual_seed(1)
    student = task.build_model(cfg.model)  # other weights
    return task, teacher, student, path


def test_weight_zero_is_label_smoothed_cross_entropy(setup):
    task, _, student, path = setup
    crit, _ = _criterion(task, path, 0.0)
    stock = LabelSmoothedCrossEntropyCriterion(task, False, 0.1)
    sample = batch(task, n=6)
    student.eval()
    ours = crit(student, sample)
    ref = stock(student, sample)
    torch.testing.assert_close(ours[0], ref[0])
    assert ours[1] == ref[1] and ours[2]["nll_loss"] == ref[2]["nll_loss"]


def test_kl_is_zero_when_the_student_is_the_teacher(setup):
    task, teacher, _, path = setup
    crit, _ = _criterion(task, path, 1.0, temperature=2.0)
    sample = batch(task, n=6)
    teacher.eval()
    loss, _, log = crit(teacher, sample)
    assert abs(log["distill_kl"]) < 1e-5 and abs(float(loss)) < 1e-5


def test_mixture_and_gradient_pull_towards_the_teacher(setup):
    task, teacher, student, path = setup
    sample = batch(task, n=6)
    student.eval()
    teacher.eval()
    half, _ = _criterion(task, path, 0.5, temperature=2.0)
    ce, _ = _criterion(task, path, 0.0)
    loss_half, _, log = half(student, sample)
    loss_ce, _, _ = ce(student, sample)
    with torch.no_grad():
        s, t = student(**sample["net_input"])[0], teacher(**sample["net_input"])[0]
    keep = sample["target"].ne(task.target_dictionary.pad())
    kl = distillation_kl(s, t, keep, 2.0)
    # the KL by hand: sum over target tokens of sum_v p_t (log p_t - log p_s), times T^2
    pt, ps = torch.softmax(t / 2, -1), torch.log_softmax(s / 2, -1)
    by_hand = ((pt * (pt.log() - ps)).sum(-1) * keep).sum() * 4
    torch.testing.assert_close(kl, by_hand, rtol=1e-4, atol=1e-4)
    assert kl > 0
    torch.testing.assert_close(loss_half, 0.5 * loss_ce + 0.5 * kl, rtol=1e-5, atol=1e-4)
    # a small step against the pure-KL loss brings the student closer to the teacher
    pure, _ = _criterion(task, path, 1.0, temperature=2.0)
    opt = torch.optim.SGD(student.parameters(), lr=0.05)
    before = float(pure(student, sample)[0])
    for _ in range(5):
        opt.zero_grad()
        pure(student, sample)[0].backward()
        opt.step()
    assert float(pure(student, sample)[0]) < before
    assert all(not p.requires_grad for p in half._teacher.parameters())
    assert "_teacher" not in dict(half.named_modules())  # not trained, not checkpointed


def test_bad_options_are_refused(setup, tmp_path):
    task, _, _, path = setup
    with pytest.raises(ValueError, match="--distill-weight"):
        _criterion(task, path, 1.5)
    with pytest.raises(ValueError, match="--distill-temperature"):
        _criterion(task, path, 0.5, temperature=0)
    with pytest.raises(ValueError, match="--distill-hidden-weight"):
        _criterion(task, path, 0.5, hidden=-1)
    with pytest.raises(ValueError, match="--teacher"):
        _criterion(task, tmp_path / "missing.pt", 0.5)
    other = tiny_task(n_words=30)  # other dictionaries than the teacher's
    with pytest.raises(ValueError, match="do not fit"):
        _criterion(other, path, 0.5)


def _states_by_hand(model, sample):
    """The encoder output and each decoder layer's output, from fairseq's own modules."""
    net = sample["net_input"]
    enc = model.encoder(net["src_tokens"], src_lengths=net["src_lengths"])
    _, extra = model.decoder(net["prev_output_tokens"], encoder_out=enc)
    return enc["encoder_out"][0], extra["inner_states"][1:], enc["encoder_padding_mask"]


def test_hidden_state_term_by_hand_and_zero_for_the_teacher(setup):
    task, teacher, student, path = setup
    sample = batch(task, n=6)
    student.eval()
    teacher.eval()
    ce, _ = _criterion(task, path, 0.0)
    hid, _ = _criterion(task, path, 0.0, hidden=2.0)
    loss_ce, _, _ = ce(student, sample)
    loss, _, log = hid(student, sample)
    # by hand: mean over features of the squared difference, summed over the source tokens
    # (encoder output) and target tokens (each decoder layer), averaged over the states
    with torch.no_grad():
        s_enc, s_dec, pad = _states_by_hand(student, sample)
        t_enc, t_dec, _ = _states_by_hand(teacher, sample)
    src_keep = (
        ~pad[0] if pad and pad[0].any() else torch.ones(s_enc.shape[1], s_enc.shape[0]).bool()
    )
    tgt_keep = sample["target"].ne(task.target_dictionary.pad())
    terms = [((s_enc - t_enc) ** 2).mean(-1).t()[src_keep].sum()]
    terms += [((s - t) ** 2).mean(-1).t()[tgt_keep].sum() for s, t in zip(s_dec, t_dec)]
    by_hand = sum(terms) / len(terms)
    assert len(s_dec) == student.decoder.num_layers and by_hand > 0
    torch.testing.assert_close(log["distill_hidden"], float(by_hand), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(loss, loss_ce + 2.0 * by_hand, rtol=1e-5, atol=1e-4)
    assert "distill_kl" not in log  # weight 0: no KL term
    # the student that is the teacher: no distance, so the loss is label-smoothed CE alone
    loss_t, _, log_t = hid(teacher, sample)
    assert abs(log_t["distill_hidden"]) < 1e-8
    torch.testing.assert_close(loss_t, ce(teacher, sample)[0])
    # a few steps on the term alone bring the student's states towards the teacher's
    opt = torch.optim.SGD(student.parameters(), lr=0.05)
    before = log["distill_hidden"]
    for _ in range(5):
        opt.zero_grad()
        (hid(student, sample)[0] - ce(student, sample)[0]).backward()
        opt.step()
    assert hid(student, sample)[2]["distill_hidden"] < before


def test_hidden_state_distance_masks_positions_and_checks_shapes():
    s = [torch.ones(3, 2, 4), torch.zeros(5, 2, 4)]
    t = [torch.zeros(3, 2, 4), torch.zeros(5, 2, 4)]
    keep = [torch.tensor([[True, True, False], [True, False, False]]), torch.ones(2, 5).bool()]
    # state 0: 3 kept positions at distance 1, state 1: none; averaged over 2 states
    assert float(hidden_state_distance(s, t, keep)) == 1.5
    with pytest.raises(ValueError, match="does not match"):
        hidden_state_distance([torch.ones(3, 2, 4)], [torch.ones(3, 2, 5)], keep[:1])
    with pytest.raises(ValueError, match="same layers"):
        hidden_state_distance(s, t[:1], keep)
