"""helper.default_normalize_score: kube-scheduler's DefaultNormalizeScore, in place."""

from __future__ import annotations

from scheduler.plugins.helper import default_normalize_score


def test_scores_scale_so_the_highest_becomes_max_priority_truncating():
    scores = [10, 20, 30]
    default_normalize_score(100, False, scores)
    assert scores == [33, 66, 100]


def test_reversed_the_highest_raw_score_becomes_zero():
    scores = [10, 20, 30]
    default_normalize_score(100, True, scores)
    assert scores == [67, 34, 0]


def test_all_zero_stays_zero_or_becomes_max_when_reversed():
    scores = [0, 0, 0]
    default_normalize_score(100, False, scores)
    assert scores == [0, 0, 0]
    default_normalize_score(100, True, scores)
    assert scores == [100, 100, 100]


def test_an_empty_list_is_left_alone():
    scores: list[int] = []
    default_normalize_score(100, True, scores)
    assert scores == []


def test_max_priority_other_than_100():
    scores = [1, 3]
    default_normalize_score(10, False, scores)
    assert scores == [3, 10]
