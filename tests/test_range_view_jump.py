"""RangeView.jump: after a lost race the search restarts inside a wide free stretch
of the watched blocks, never on a taken address and never outside the spans."""

from __future__ import annotations

from dranet_cloud.ipam.cluster.journal import RangeView
from dranet_cloud.toolkit.iprange import IPRange

RANGE = IPRange.parse("10.9.0.0/24")  # 10.9.0.1 .. 10.9.0.254


def view_with(taken: list[int], home: int = 0) -> RangeView:
    view = RangeView(RANGE, home)
    for offset in taken:
        view.add(view.lo + offset)
    return view


def test_the_new_home_is_inside_one_of_the_widest_free_stretches() -> None:
    # Watched block 0 (offsets 0..63): taken 0..9 and 20..29, so the free stretches
    # are 10..19 (10 wide) and 30..63 (34 wide); with one choice it must be the wide one.
    view = view_with([*range(10), *range(20, 30)])
    lo = view.lo
    for seed in range(20):
        view._random.seed(seed)
        view.jump([(lo, lo + 63)], choices=1)
        start = lo + view.home
        assert lo + 30 <= start <= lo + 63
        assert start not in view
        # The middle half of the stretch: the winner of the race keeps its edge.
        assert lo + 30 + 34 // 4 <= start < lo + 64 - 34 // 4


def test_two_losers_seldom_restart_at_the_same_point() -> None:
    homes = set()
    for node_home in range(8):
        view = view_with([0, 1, 2], home=node_home)
        view.jump([(view.lo, view.lo + 63), (view.lo + 64, view.lo + 127)])
        homes.add(view.home)
    assert len(homes) > 1


def test_spans_without_a_free_address_leave_the_home_alone() -> None:
    view = view_with(list(range(64)), home=5)
    view.jump([(view.lo, view.lo + 63)])
    assert view.home == 5


def test_spans_are_clipped_to_the_range() -> None:
    view = view_with([])
    view.jump([(view.hi - 10, view.hi + 500)], choices=1)
    assert view.hi - 10 <= view.lo + view.home <= view.hi
