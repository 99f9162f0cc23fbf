"""The FLOP bound of the speed benchmark (bench/flops.py), checked by hand-counted cases."""

import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT))
from bench.flops import Dims, captured_share, decode_macs, flop_bound  # noqa: E402

DIMS = Dims(8, 8, 16, 16, 4, 4, 10)
FULL = {"enc-self": [2], "dec-self": [2], "cross": [2]}


def test_no_heads_removed_is_bound_one():
    assert flop_bound(DIMS, FULL, FULL, src_len=5, steps=3, beam=2) == 1.0


def test_macs_by_hand_one_layer_each():
    src, steps, beam = 3, 2, 1
    w = 2 * 4  # heads * head_dim
    enc = src * (4 * 8 * w + 2 * src * w + 2 * 8 * 16)
    per_step = sum(4 * 8 * w + 2 * t * w + 2 * 8 * w + 2 * src * w + 2 * 8 * 16 + 8 * 10
                   for t in (1, 2))  # fmt: skip
    cross_kv = src * 2 * 8 * w
    assert decode_macs(DIMS, FULL, src, steps, beam) == enc + beam * per_step + cross_kv


def test_removing_heads_raises_the_bound_and_decoder_heads_weigh_more_per_token():
    enc_cut = {"enc-self": [0], "dec-self": [2], "cross": [2]}
    dec_cut = {"enc-self": [2], "dec-self": [0], "cross": [2]}
    b_enc = flop_bound(DIMS, FULL, enc_cut, src_len=5, steps=20, beam=5)
    b_dec = flop_bound(DIMS, FULL, dec_cut, src_len=5, steps=20, beam=5)
    assert 1.0 < b_enc < b_dec


def test_captured_share():
    assert captured_share(0.5, 1.0, 2.0) == pytest.approx(1.0)  # all of the allowed saving
    assert captured_share(1.0, 1.0, 2.0) == 0.0
    assert captured_share(0.6, 1.0, 2.0) == pytest.approx(0.8)
