"""DRANET's ``MergeNetworkConfig(user, base)``, as DRANET main does it.

The node daemon builds a claim's final config as ``merge(user, cloud)`` and,
when that names a profile, ``merge(merged, profile_answer)``.  DRANET merges
with mergo (``pkg/apis/config_merge.go``, checked at ``f258477`` and PR #241):
base first, then the user's side with override and appended slices, then
de-duplication.  The rules, each a case in ``tests/test_merge.py``:

* a base of ``None`` gives a plain copy of the user side (no de-duplication,
  no ``ipvlan`` drop: DRANET returns early);
* a scalar set on the left wins; an unset or empty one takes the base;
* a *pointer* field (``mtu``, ``dhcp``...) set to ``false``/``0`` on the left
  does **not** override the base (mergo treats it as empty, DRANET issue
  #294);
* lists: base entries first, then the left's, de-duplicated keeping the
  *last* occurrence (the left's copy): addresses by exact string, routes by
  (destination, table), neighbors by destination; rules are never
  de-duplicated;
* maps (ethtool features, private flags) key by key, the left wins, ``false``
  included; nested structs (``vrf``, ``ipvlan``, ``ethtool``) field by field;
* ``ipvlan`` is dropped when the merged ``type`` is not ``IPVLAN``.

Open PR #316 changes two of these rules at once: a pointer set to
``false``/``0`` on the left wins, and identical rules are de-duplicated
keeping the left's copy.  :data:`PR_316_MERGE` switches both (off, as on
DRANET main, until the PR merges).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from pydantic import BaseModel

from dranet_cloud.wire.models import TYPE_IPVLAN, NetworkConfig

# DRANET main: a left-hand pointer set to false/0 loses to the base (mergo,
# issue #294), and rules are never de-duplicated.  PR #316 (open) makes every
# set pointer win and drops identical rules but the left's copy: set True.
PR_316_MERGE = False

# Go value (non-pointer) scalars: their zero value is "unset" in any case.
_GO_VALUE_SCALARS = frozenset(
    {"profile", "name", "type", "addressing", "mode", "flag", "destination", "gateway", "source"}
)

T = TypeVar("T")


def _left_wins(field: str, value: Any) -> bool:
    """Whether a set left-hand scalar overrides the base (the one zero-value rule)."""
    if value is None:
        return False
    if field in _GO_VALUE_SCALARS or not PR_316_MERGE:
        return not (value == "" or value is False or (type(value) is int and value == 0))
    return True


def _merge_scalar(field: str, left: Any, base: Any) -> Any:
    if _left_wins(field, left):
        return left
    return base if base is not None else left


def _dedup_last(items: list[T], key: Callable[[T], Hashable]) -> list[T]:
    """Keep the last occurrence of each key, in the order of those occurrences."""
    last = {key(item): i for i, item in enumerate(items)}
    return [item for i, item in enumerate(items) if last[key(item)] == i]


def _merge_list(left: list[Any] | None, base: list[Any] | None) -> list[Any] | None:
    out = [*(base or []), *(left or [])]
    return [x.model_copy(deep=True) if isinstance(x, BaseModel) else x for x in out] or None


def _merge_map(left: dict[str, Any] | None, base: dict[str, Any] | None) -> dict[str, Any] | None:
    if left is None and base is None:
        return None
    return {**(base or {}), **(left or {})}


def _merge_model(left: BaseModel | None, base: BaseModel | None) -> Any:
    if left is None:
        return base.model_copy(deep=True) if base is not None else None
    if base is None:
        return left.model_copy(deep=True)
    values: dict[str, Any] = {}
    for name in type(left).model_fields:
        lv, bv = getattr(left, name), getattr(base, name)
        if isinstance(lv, BaseModel) or isinstance(bv, BaseModel):
            values[name] = _merge_model(lv, bv)
        elif isinstance(lv, dict) or isinstance(bv, dict):
            values[name] = _merge_map(lv, bv)
        elif isinstance(lv, list) or isinstance(bv, list):
            values[name] = _merge_list(lv, bv)
        else:
            values[name] = _merge_scalar(name, lv, bv)
    return type(left).model_construct(**values)


def merge_network_config(user: NetworkConfig | None, base: NetworkConfig | None) -> NetworkConfig:
    """DRANET's ``MergeNetworkConfig(user, base)``: the left side wins (module docstring).

    Neither input is modified.
    """
    left = user if user is not None else NetworkConfig()
    if base is None:
        return left.model_copy(deep=True)
    merged: NetworkConfig = _merge_model(left, base)
    iface = merged.interface
    if iface.addresses:
        iface.addresses = _dedup_last(iface.addresses, lambda a: a)
    if merged.routes:
        merged.routes = _dedup_last(merged.routes, lambda r: r.dedup_key())
    if merged.neighbors:
        merged.neighbors = _dedup_last(merged.neighbors, lambda n: n.dedup_key())
    if merged.rules and PR_316_MERGE:
        merged.rules = _dedup_last(merged.rules, lambda r: r.dedup_key())
    if iface.type != TYPE_IPVLAN:
        iface.ipvlan = None
    return merged
