"""``deploy/k8s/``: every manifest valid against the Kubernetes schemas, strictly (no
field the schema does not name), offline (kubernetes-validate bundles them); and the
kit's promises: a StatefulSet of three whose cluster URL comes from the Secret,
ready on ``/readyz``, live on ``/healthz``, its data a volume claim; a headless
Service of the members, a client Service, a PodDisruptionBudget."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Final

import kubernetes_validate
import pytest
import yaml

from tests.deploy.kit import DEPLOY

#: The Kubernetes version the manifests are checked against (the package's newest
#: schemas; an older cluster's are in it too: kubernetes-validate -k).
VERSION: Final = kubernetes_validate.latest_version()


def manifests() -> list[tuple[Path, dict[str, Any]]]:
    """Every document of every manifest, with its file."""
    found: list[tuple[Path, dict[str, Any]]] = []
    for path in sorted((DEPLOY / "k8s").glob("*.yaml")):
        found.extend((path, doc) for doc in yaml.safe_load_all(path.read_text()) if doc)
    return found


def by_kind() -> dict[tuple[str, str], dict[str, Any]]:
    return {(doc["kind"], doc["metadata"]["name"]): doc for _, doc in manifests()}


def test_every_manifest_is_valid_against_the_schemas_strictly() -> None:
    checked = manifests()
    assert {doc["kind"] for _, doc in checked} == {
        "Secret",
        "StatefulSet",
        "Service",
        "PodDisruptionBudget",
    }
    for path, doc in checked:
        kubernetes_validate.validate(doc, VERSION, strict=True)  # raises when invalid
        assert path.suffix == ".yaml"


@pytest.mark.parametrize(
    "breaks",
    [
        lambda sts: sts["spec"].__setitem__("replica", 3),  # a misspelt field
        lambda sts: sts["spec"].__setitem__("replicas", "three"),  # a wrong type
        lambda sts: sts["spec"]["template"]["spec"]["containers"][0]["readinessProbe"][
            "httpGet"
        ].pop("port"),  # a required field
    ],
)
def test_a_broken_statefulset_is_refused(breaks: Any) -> None:
    sts = copy.deepcopy(by_kind()[("StatefulSet", "tenure")])
    breaks(sts)
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(sts, VERSION, strict=True)


def test_three_members_probed_on_readyz_and_healthz_with_their_data_claimed() -> None:
    kinds = by_kind()
    sts = kinds[("StatefulSet", "tenure")]["spec"]
    assert sts["replicas"] == 3
    assert sts["serviceName"] == "tenure-members"
    pod = sts["template"]["spec"]
    (container,) = pod["containers"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    env = {item["name"]: item.get("value") for item in container["env"]}
    assert ports == {"native": 6388, "http": int(env["TENURE_HTTP_PORT"])}
    # The cluster's etcd URL: from the Secret, whose key is the server's variable.
    (source,) = container["envFrom"]
    secret = kinds[("Secret", source["secretRef"]["name"])]
    assert secret["stringData"]["TENURE_CLUSTER"].startswith("etcd://")
    assert "TENURE_CLUSTER" not in env
    # Each member advertises its own name under the headless Service.
    assert env["TENURE_ADVERTISE"] == "$(POD_NAME).tenure-members:6388"
    # The data directory is the claim of each member.
    (claim,) = sts["volumeClaimTemplates"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts[env["TENURE_DATA_DIR"]] == claim["metadata"]["name"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False


def test_a_headless_service_a_client_service_and_a_disruption_budget() -> None:
    kinds = by_kind()
    labels = kinds[("StatefulSet", "tenure")]["spec"]["template"]["metadata"]["labels"]
    members = kinds[("Service", "tenure-members")]["spec"]
    assert members["clusterIP"] == "None"
    assert members["publishNotReadyAddresses"] is True  # standbys name the leader
    client = kinds[("Service", "tenure")]["spec"]
    pdb = kinds[("PodDisruptionBudget", "tenure")]["spec"]
    for selector in (members["selector"], client["selector"], pdb["selector"]["matchLabels"]):
        assert selector.items() <= labels.items()
    assert pdb["minAvailable"] == 1
    assert pdb["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
