"""95% intervals by bootstrap over the timed steps, and ratios that say when they cannot tell two
points apart (reports/dlbench_reports/intervals.py)."""
from __future__ import annotations

import copy

from dlbench_reports import intervals
from dlbench_reports.records import load


def test_a_throughput_interval_holds_the_throughput_and_is_reproducible(results):
    r = load(results("ci")).ok[0]  # digits-cnn, 100 timed steps
    lo, hi = intervals.throughput_interval(r)
    t = r.data["metrics"]["throughput_img_s"]
    assert lo < t < hi
    assert intervals.throughput_interval(r) == (lo, hi)  # seeded: the same report every time


def test_a_point_against_itself_is_not_distinguishable_and_against_twice_as_slow_it_is(results):
    r = load(results("ci")).ok[0]
    twin = copy.deepcopy(r)  # the same steps, measured as another point
    twin.data["point"]["id"] = "twin"
    same = intervals.ratio_interval(r, twin)
    assert same[0] < 1 < same[1]
    assert intervals.ratio_text(1.0, same).endswith("not distinguishable")
    slow = copy.deepcopy(r)
    slow.data["metrics"]["throughput_img_s"] /= 2
    steps = r.data["metrics"]["step_time_s"]["all"]
    slow.data["metrics"]["step_time_s"]["all"] = [2 * s for s in steps]
    slow.data["point"]["id"] = "slow"
    iv = intervals.ratio_interval(r, slow)
    assert 1 < iv[0] < 2 < iv[1]  # far from 1: the slow point is told apart
    text = intervals.ratio_text(2.0, iv)
    assert text.startswith("2.00x [") and "not distinguishable" not in text


def test_repetitions_give_the_interval_when_there_are_five_or_more(results):
    r = copy.deepcopy(load(results("ci")).ok[0])
    t = r.data["metrics"]["throughput_img_s"]
    r.data["metrics"]["repetitions"] = {
        "count": 5, "throughput_img_s": [0.5 * t, 0.75 * t, t, 1.25 * t, 1.5 * t],
        "median": t, "mean": t, "stddev": 0.4 * t, "cv": 0.4}
    lo, hi = intervals.throughput_interval(r)
    # The repetitions' spread (50%), far wider than the steps' (a few %): the interval is theirs.
    assert lo < 0.75 * t and hi > 1.25 * t


def test_too_few_steps_give_no_interval(results):
    r = copy.deepcopy(load(results("ci")).ok[0])
    r.data["metrics"]["step_time_s"]["all"] = r.data["metrics"]["step_time_s"]["all"][:9]
    assert intervals.throughput_interval(r) is None
    assert intervals.ratio_text(1.5, None) == "1.50x"


def test_a_long_run_bootstraps_block_means(results):
    r = copy.deepcopy(load(results("ci")).ok[0])
    steps = r.data["metrics"]["step_time_s"]["all"]
    r.data["metrics"]["step_time_s"]["all"] = (steps * 100)[:10001]  # 10,001 steps
    lo, hi = intervals.throughput_interval(r)
    t = r.data["metrics"]["throughput_img_s"]
    assert lo < t < hi and hi - lo < 0.05 * t  # 10,001 steps: narrow
