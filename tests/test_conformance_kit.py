"""The conformance suite catches a broken plugin, and says why.

A vendor wrote ``acmecloud`` from the docs alone and the suite passed it with
a ``confirm`` whose path had a typo, an MTU of 70000 and an empty
``known_macs()``; its one failure read ``AssertionError: ('eth0',
'acmecloud.example.com/is-primary')``.  Here each of those mistakes
(``tests/acmecloud.py``) is installed as the ``acmecloud`` entry point of a
throw-away distribution, the host's normal load path, and the suite runs on
it through pytest exactly as a vendor's test module runs it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ACMECLOUD = Path(__file__).with_name("acmecloud.py")
VENDOR_TEST = """\
from dranet_cloud.testing.conformance import PluginConformance


class TestAcmecloudConformance(PluginConformance):
    plugin_name = "acmecloud"
"""


def run_suite(
    pytester: pytest.Pytester, variant: str, *select: str, body: str = ""
) -> pytest.RunResult:
    """Install ``acmecloud:<variant>`` as a plugin and run the suite on it.

    ``body``: more lines of the vendor's test class (``has_device_config = False``).
    """
    pytester.makepyfile(
        acmecloud=ACMECLOUD.read_text(), test_acmecloud_conformance=VENDOR_TEST + body
    )
    dist = pytester.mkdir("acmecloud_vendor-0.1.dist-info")
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acmecloud-vendor\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[dranet_cloud]\nacmecloud = acmecloud:{variant}\n")
    pytester.syspathinsert()
    args = ["-p", "no:cacheprovider", "-q", "-rfE"]
    return pytester.runpytest(*args, *(["-k", " or ".join(select)] if select else []))


def failures(result: pytest.RunResult) -> str:
    return "\n".join(result.outlines)


def explained(result: pytest.RunResult, test: str, message: str) -> None:
    """``test`` failed, and its assertion reads ``message`` (an fnmatch pattern)."""
    result.stdout.fnmatch_lines([f"E   *AssertionError: {message}"])
    result.stdout.fnmatch_lines([f"FAILED *::TestAcmecloudConformance::{test}*"])


def test_a_correct_plugin_passes(pytester: pytest.Pytester) -> None:
    result = run_suite(pytester, "GOOD")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) >= 10 and "failed" not in outcomes, failures(result)


def test_a_typo_in_confirms_path_fails_detection_saying_none_and_why(
    pytester: pytest.Pytester,
) -> None:
    result = run_suite(pytester, "TYPO_IN_CONFIRM_PATH")
    outcomes = result.parseoutcomes()
    assert outcomes["failed"] == 1 and outcomes["passed"] >= 9, failures(result)
    explained(
        result,
        "test_detected_end_to_end_on_its_sample_node",
        "plugin acmecloud: detection on its own sample node answered `none`: local evidence "
        "'DMI sys_vendor=AcmeCloud' was not confirmed: metadata answered, but not as this "
        "environment (confirm_environment returned None: its own emulator answered, but the "
        "plugin did not recognise the answer; check the path *); its emulator was asked: "
        "GET /acme/v1/instnace -> 404",
    )


def test_an_mtu_of_70000_fails_naming_the_device_the_field_and_the_bound(
    pytester: pytest.Pytester,
) -> None:
    result = run_suite(pytester, "MTU_70000", "device_configs", "final_merged")
    result.assert_outcomes(failed=2)
    explained(
        result,
        "test_device_configs_validate",
        "plugin acmecloud: device eth0/02:ac:00:00:00:01/0000:00:04.0: DRANET would refuse "
        "its device config {'interface': {'mtu': 70000}, *}: interface.mtu: expected at most "
        "65535 (no Linux Ethernet device takes more; DRANET's netlink call fails), got 70000 "
        "[[]mtu-maximum[]]",
    )
    explained(
        result,
        "test_final_merged_configs_validate",
        "plugin acmecloud: eth0/*: device config + claim 0: interface.mtu: expected at most "
        "65535 *got 70000*",
    )


def test_an_empty_known_macs_fails_saying_so(pytester: pytest.Pytester) -> None:
    result = run_suite(pytester, "EMPTY_KNOWN_MACS", "knows", "detected")
    result.assert_outcomes(passed=1, failed=1)
    explained(
        result,
        "test_snapshot_knows_the_sample_nodes_nics",
        "plugin acmecloud: known_macs() of its snapshot is empty on its own sample node and "
        "emulator: the host then takes every NIC for a hot-plugged one*",
    )


def test_a_node_file_outside_host_paths_fails_naming_what_the_cut_node_answers(
    pytester: pytest.Pytester,
) -> None:
    """A plugin that reads /etc/acme/mtu without declaring it in host_paths."""
    result = run_suite(pytester, "UNDECLARED_HOST_FILE", "node_directories")
    result.assert_outcomes(failed=1)
    explained(
        result,
        "test_reads_only_the_node_directories_it_declares",
        "plugin acmecloud: on its sample node holding only /sys (its host_paths hook and the "
        "core's), answers differ from the whole node's; declare every node directory a hook "
        "reads in host_paths:",
    )
    result.stdout.fnmatch_lines(["*config eth0/02:ac:00:00:00:01*1500*9000*"])


@pytest.mark.parametrize(
    ("variant", "selected", "test", "message"),
    [
        pytest.param(
            "HYPHEN_IN_ATTRIBUTE",
            "kubernetes_limits",
            "test_attributes_within_kubernetes_limits",
            "plugin acmecloud: device eth0/02:ac:00:00:00:01/0000:00:04.0: attribute "
            "'acmecloud.example.com/is-primary': name 'is-primary' is not a C identifier *; "
            "expected <domain>/<name> with a DNS-subdomain domain *",
            id="attribute-the-api-server-refuses",
        ),
        # DRANET's rules for routes and neighbors (pkg/apis/validation.go, validateRoutes
        # and validateNeighborConfig): a universe-scope route needs a gateway; a neighbor
        # needs a MAC.
        pytest.param(
            "ROUTE_AND_NEIGHBOR_DRANET_REFUSES",
            "device_configs_validate",
            "test_device_configs_validate",
            "plugin acmecloud: device eth0/*: DRANET would refuse its device config *: "
            "routes[[]0[]].gateway: required unless scope is 253 (link)*[[]route-gateway[]]; "
            "neighbors[[]0[]].hardwareAddr: cannot be empty [[]neighbor-mac[]]",
            id="route-and-neighbor-dranet-refuses",
        ),
    ],
)
def test_a_value_kubernetes_or_dranet_refuses_is_explained(
    pytester: pytest.Pytester, variant: str, selected: str, test: str, message: str
) -> None:
    result = run_suite(pytester, variant, selected)
    result.assert_outcomes(failed=1)
    explained(result, test, message)


def test_a_misspelt_hook_fails_naming_the_plugin_the_function_and_the_hook(
    pytester: pytest.Pytester,
) -> None:
    result = run_suite(pytester, "MISSPELT_HOOK")
    outcomes = result.parseoutcomes()
    assert outcomes["failed"] == 1 and "passed" not in outcomes, failures(result)
    explained(
        result,
        "test_loads_through_the_hosts_load_path",
        "plugin acmecloud: the host's load path refuses it (`dranet-cloud plugins` and `serve` "
        "stop on it too): plugin acmecloud: function attribute_rankng is marked @hookimpl but "
        "'attribute_rankng' is no hook*attribute_ranking*",
    )


def test_a_cloud_without_device_config_passes_when_the_class_says_so(
    pytester: pytest.Pytester,
) -> None:
    """docs/plugin-api.md calls device_config optional; ``has_device_config = False`` is the
    vendor's way to say the cloud has none, and then the hook may be left out entirely."""
    result = run_suite(pytester, "NO_DEVICE_CONFIG", body="    has_device_config = False\n")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) >= 10 and "failed" not in outcomes, failures(result)


def test_a_cloud_without_device_config_fails_naming_the_switch_otherwise(
    pytester: pytest.Pytester,
) -> None:
    result = run_suite(pytester, "NO_DEVICE_CONFIG", "roles_are_backed", "device_configs")
    result.assert_outcomes(failed=2)
    explained(
        result,
        "test_roles_are_backed_by_hooks",
        "plugin acmecloud: it implements no device_config hook, and the suite expects one "
        "(has_device_config = True, the default); a cloud with no claim-independent baseline "
        "per NIC sets has_device_config = False in the test class",
    )
