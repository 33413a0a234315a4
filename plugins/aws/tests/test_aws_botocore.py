"""A real AWS client library reads the emulator: proof that it speaks IMDS.

botocore is what boto3 and the AWS CLI use to reach IMDS.  Its fetchers do
the IMDSv2 dance themselves (token PUT, then GETs with the token header) and
honour ``AWS_EC2_METADATA_SERVICE_ENDPOINT``; if the emulator spoke a dialect
only this plugin understands, they would fail or read something else.
"""

from __future__ import annotations

from typing import Any

import botocore.session as botocore_session  # type: ignore[import-untyped]
import botocore.utils as botocore_utils  # type: ignore[import-untyped]
import pytest
from dranet_cloud_aws.metadata_source import load_instance

from dranet_cloud.contract.context import ProviderContext
from dranet_cloud.testing import Emulator

TOKEN_HEADER = "X-aws-ec2-metadata-token"


class Ec2MetadataReader(botocore_utils.IMDSFetcher):  # type: ignore[misc]
    """botocore's own extension pattern (as its region fetcher): token, then GET."""

    def read(self, path: str) -> str:
        token = self._fetch_metadata_token()
        assert token, "botocore got no IMDSv2 token from the emulator"
        response = self._get_request(url_path=path, retry_func=None, token=token)
        text: str = response.text
        return text


def test_botocore_reads_the_same_instance_type_and_enis(aws_emulator: Emulator) -> None:
    reader = Ec2MetadataReader(
        base_url=aws_emulator.url,
        env={},
        config={"ec2_metadata_v1_disabled": True},  # refuse any IMDSv1 fallback
    )
    instance_type = reader.read("latest/meta-data/instance-type")
    listing = reader.read("latest/meta-data/network/interfaces/macs/")
    boto_macs = [line.rstrip("/") for line in listing.splitlines()]
    boto_enis = {
        mac: reader.read(f"latest/meta-data/network/interfaces/macs/{mac}/interface-id")
        for mac in boto_macs
    }

    snapshot = load_instance(ProviderContext(env=aws_emulator.env), 5.0)
    assert instance_type == snapshot.identity.instance_type == "p5.48xlarge"
    assert set(boto_macs) == set(snapshot.known_macs())
    assert boto_enis == {mac: eni.interface_id for mac, eni in snapshot.enis.items()}
    # botocore sent every GET with a token it obtained itself.
    assert all(TOKEN_HEADER in r.headers for r in aws_emulator.log if r.method == "GET")


def test_botocore_region_provider_follows_the_sdk_endpoint_variable(
    aws_emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The variable the emulator exports for the SDKs points botocore at it.
    env: dict[str, Any] = dict(aws_emulator.env)
    monkeypatch.setenv(
        "AWS_EC2_METADATA_SERVICE_ENDPOINT", env["AWS_EC2_METADATA_SERVICE_ENDPOINT"]
    )
    session = botocore_session.Session()
    region = botocore_utils.IMDSRegionProvider(session, environ=env).provide()
    snapshot = load_instance(ProviderContext(env=env), 5.0)
    assert region == snapshot.identity.region == "us-east-2"
    # botocore asked for the zone with a trailing slash; the emulator answered it.
    assert aws_emulator.requests("/latest/meta-data/placement/availability-zone/")
