"""An identity document EC2 would never send fails the snapshot, naming the URL (issue 26)."""

from __future__ import annotations

import json

import pytest
from dranet_cloud_aws.metadata_source import DOCUMENT_PATH, _document

from dranet_cloud.toolkit.metadata import MetadataNotADocument

GOOD = {"instanceType": "p5.48xlarge", "region": "us-east-2", "availabilityZone": "us-east-2a"}


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("instanceType", "Sign in", "cannot be an EC2 instance type"),
        ("region", "<html>", "cannot be an AWS region"),
        ("availabilityZone", "eu-west-1a", "is not in region"),
    ],
)
def test_a_document_ec2_would_not_send_is_refused(key: str, value: str, says: str) -> None:
    url = "http://127.0.0.1:9"
    assert _document(json.dumps(GOOD), url)["region"] == "us-east-2"
    with pytest.raises(MetadataNotADocument) as info:
        _document(json.dumps({**GOOD, key: value}), url)
    assert f"GET {url}{DOCUMENT_PATH}" in str(info.value) and says in str(info.value)
