"""FieldRecord: the dataclass behaviour the detection path's records keep."""

from __future__ import annotations

import pytest

from dranet_cloud.context import ProviderOptions
from dranet_cloud.detection import DetectionResult


def test_records_compare_and_show_by_field() -> None:
    a = DetectionResult("gce", False, "dmi", 1.0, {"gce": "dmi"})
    assert a == DetectionResult("gce", False, "dmi", 1.0, {"gce": "dmi"})
    assert a != DetectionResult("gce", False, "dmi", 1.0, {"gce": "other"})
    assert repr(a) == (
        "DetectionResult(provider='gce', explicit=False, evidence='dmi', elapsed_ms=1.0, "
        "candidates={'gce': 'dmi'}, failures={})"
    )
    assert ProviderOptions(node_name="n") == ProviderOptions(node_name="n")
    assert ProviderOptions(node_name="n") != ProviderOptions(node_name="m")
    assert repr(ProviderOptions()).startswith("ProviderOptions(webhook_url=None, ")
    assert (a == ProviderOptions()) is False  # different record types never compare equal
    with pytest.raises(TypeError):
        hash(a)  # mutable, as a dataclass is
