"""Values IMDS never answers for the VM size or region fail the snapshot (issue 26)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from dranet_cloud_azure.snapshot import parse_instance


def test_a_value_that_cannot_be_a_vm_size_or_region_is_refused(
    azure_document: dict[str, Any],
) -> None:
    assert parse_instance(azure_document).vm_size
    for key, value in (("vmSize", "Please sign in"), ("location", "<p>portal</p>")):
        odd = copy.deepcopy(azure_document)
        odd["compute"][key] = value
        with pytest.raises(ValueError, match=f"compute.{key} is .*which cannot be an Azure"):
            parse_instance(odd, endpoint="http://127.0.0.1:9")
