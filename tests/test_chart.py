"""The Helm chart: scripts/check-chart.sh lints, renders and validates it; the renderings agree with the code."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from typer.main import get_command

from swarmlog.acl import Role, grants
from swarmlog.cli import app
from swarmlog.settings import SECRET_FIELDS, Settings
from swarmlog.streams.app.config import worker_setting
from swarmlog.topics import catalog

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "deploy" / "helm" / "swarmlog"
BIN = ROOT / ".cache" / "go-bin"
RENDERED = ROOT / ".cache" / "chart"
# The first run builds helm from the Go module proxy: minutes (docs/testing.md).
pytestmark = pytest.mark.timeout(1800)
# swarmlog.acl's names of resource types, patterns and operations, as Strimzi's KafkaUser spells them.
STRIMZI_TYPES = {"TOPIC": "topic", "GROUP": "group", "TRANSACTIONAL_ID": "transactionalId"}
STRIMZI_PATTERNS = {"LITERAL": "literal", "PREFIXED": "prefix"}
STRIMZI_OPERATIONS = {
    "READ": "Read",
    "WRITE": "Write",
    "DESCRIBE": "Describe",
    "CREATE": "Create",
    "DESCRIBE_CONFIGS": "DescribeConfigs",
    "ALTER_CONFIGS": "AlterConfigs",
}


@pytest.fixture(scope="module")
def check() -> subprocess.CompletedProcess[str]:
    """scripts/check-chart.sh, run once: it builds helm and the validator, lints, renders and validates."""
    return subprocess.run(
        ["bash", "scripts/check-chart.sh"], cwd=ROOT, capture_output=True, text=True, timeout=1700, check=False
    )


@pytest.fixture(scope="module")
def rendered(check: subprocess.CompletedProcess[str]) -> dict[str, list[dict[str, Any]]]:
    """Each rendering's manifests (default, secured, strimzi), from the check's output."""
    assert check.returncode == 0, check.stdout + check.stderr
    return {
        path.stem: [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
        for path in sorted(RENDERED.glob("*.yaml"))
    }


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    """helm as the check built it."""
    (binary,) = BIN.glob("helm-*/helm")
    return subprocess.run([str(binary), *args], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)


def validate(manifest: str) -> subprocess.CompletedProcess[str]:
    """The validator on one manifest given on its standard input."""
    return subprocess.run(
        [str(BIN / "swarmlog-chart-validate")], input=manifest, capture_output=True, text=True, timeout=60, check=False
    )


def containers(docs: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(workload, container) for every container of every workload."""
    found = []
    for doc in docs:
        if doc["kind"] in ("StatefulSet", "Deployment", "Job"):
            found += [(doc, container) for container in doc["spec"]["template"]["spec"]["containers"]]
    return found


def by_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    """The documents of one kind, by name."""
    return {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == kind}


def test_the_chart_lints_renders_and_validates(check: subprocess.CompletedProcess[str]) -> None:
    assert check.returncode == 0, check.stdout + check.stderr
    assert "ok: 3 renderings linted and valid" in check.stdout
    assert check.stdout.count(" 0 invalid") == 3
    assert re.search(r"KafkaTopic \d+, KafkaUser 6,", check.stdout)  # the strimzi rendering: Strimzi's kinds too


DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {name: top}
spec:
  selector: {matchLabels: {app: top}}
  template:
    metadata: {labels: {app: top}}
    spec:
      containers:
        - name: top
          image: swarmlog/swarmlog:0.1.0
          resources: {limits: {memory: 1Gi}}
"""


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("resources:", "resurces:"), 'unknown field "spec.template.spec.containers[0].resurces"'),
        (("memory: 1Gi", "memory: lots"), "quantities must match the regular expression"),
        (("name: top}", "name: Top_1}"), "metadata.name: Invalid value"),
        (("labels: {app: top}", "labels: {app: other}"), "`selector` does not match template `labels`"),
        (("kind: Deployment", "kind: Deploymnet"), 'no schema for apiVersion "apps/v1" kind "Deploymnet"'),
        (
            ("image: swarmlog", "volumeMounts: [{name: data, mountPath: /data}]\n          image: swarmlog"),
            'spec.template.spec.containers[0].volumeMounts[0].name: Not found: "data"',
        ),
        (("metadata: {name: top}", "metadata: {name: top, name: top2}"), 'key "name" already set in map'),
    ],
)
def test_the_validator_refuses_a_bad_manifest(
    check: subprocess.CompletedProcess[str], change: tuple[str, str], expected: str
) -> None:
    assert check.returncode == 0, check.stdout + check.stderr
    assert validate(DEPLOYMENT).returncode == 0
    result = validate(DEPLOYMENT.replace(*change, 1))
    assert result.returncode == 1, result.stdout
    assert expected in result.stderr and "invalid: document 1" in result.stderr


def test_the_validator_checks_strimzi_resources(check: subprocess.CompletedProcess[str]) -> None:
    assert check.returncode == 0, check.stdout + check.stderr
    user = """apiVersion: kafka.strimzi.io/v1
kind: KafkaUser
metadata: {name: swarmlog-agent, labels: {strimzi.io/cluster: my-cluster}}
spec:
  authentication: {type: scram-sha-512}
  authorization:
    type: simple
    acls: [{resource: {type: topic, name: swarm., patternType: prefix}, operations: [Read]}]
"""
    assert validate(user).returncode == 0
    assert validate(user.replace("kafka.strimzi.io/v1", "kafka.strimzi.io/v1beta2")).returncode == 0
    result = validate(user.replace("[Read]", "[Reed]"))
    assert result.returncode == 1 and 'spec.authorization.acls[0].operations[0]: Unsupported value: "Reed"' in (
        result.stderr
    )
    result = validate(user.replace("patternType:", "pattern:"))
    assert result.returncode == 1 and 'unknown field "spec.authorization.acls[0].resource.pattern"' in result.stderr


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["kafka.securityProtocol=SASL_SSL"], "needs a password for the admin role"),
        (["kafka.tls.clientCertificates=true"], "kafka.tls.clientCertificates needs kafka.securityProtocol SSL"),
        (["kafka.strimzi.enabled=true"], "kafka.strimzi.authentication=scram-sha-512 needs"),
        (["agents.pools[0].name=a", "agents.pools[0].region=region-1"], "no coordinator serves it"),
        (["agents.pools[0].name=a", "agents.pools[0].gpus=2"], "for 2 GPUs per pod use mode fleet"),
        (["redis.tls.existingSecret=redis-tls"], "is not rediss://"),
        (["signing.enabled=true", "signing.trust=x"], "signing.enabled needs signing.keysSecret"),
        (["signing.enabled=true", "signing.keysSecret=keys"], "signing.enabled needs the trust file"),
        (["artifacts.enabled=false"], "with 4 agent pods: an agent could not read another pod's artifacts"),
    ],
)
def test_the_chart_refuses_values_that_contradict_each_other(
    check: subprocess.CompletedProcess[str], values: list[str], expected: str
) -> None:
    assert check.returncode == 0, check.stdout + check.stderr
    result = helm("template", "swarmlog", str(CHART), *[arg for value in values for arg in ("--set", value)])
    assert result.returncode != 0 and expected in result.stderr, result.stderr


def parse(command: click.Command, args: list[str]) -> None:
    """Parse a command line as swarmlog's CLI would, without running it; a usage error raises."""
    if isinstance(command, click.Group) and args and args[0] in command.commands:
        parse(command.commands[args[0]], args[1:])
    else:
        command.make_context(command.name or "swarmlog", list(args))


def test_every_process_is_given_a_command_line_the_cli_takes(rendered: dict[str, list[dict[str, Any]]]) -> None:
    cli = get_command(app)
    pod = {"$(POD_NAME)": "swarmlog-agent-0", "$(NODE_NAME)": "gpu-node-1", "region-$(REGION_INDEX)": "region-1"}
    seen = set()
    for docs in rendered.values():
        for _, container in containers(docs):
            args = [pod.get(arg, arg) for arg in container["args"]]
            parse(cli, args)
            seen.add(args[0])
    assert seen == {"coordinator", "top", "streams", "agent", "fleet", "topics"}


def environment(docs: list[dict[str, Any]], container: dict[str, Any], files: Path) -> dict[str, str]:
    """A container's SWARMLOG_* environment: the ConfigMap's and its own, its secret files made under `files`."""
    env = dict(by_kind(docs, "ConfigMap")["swarmlog"]["data"])
    for variable in container.get("env", []):
        if variable["name"].startswith("SWARMLOG_") and "value" in variable:
            value = variable["value"]
            if value.startswith("/etc/swarmlog/"):
                path = files / value.removeprefix("/etc/swarmlog/")
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("secret\n")
                value = str(path)
            env[variable["name"]] = value
    return env


def test_the_settings_take_every_process_environment(rendered: dict[str, list[dict[str, Any]]], tmp_path: Path) -> None:
    fields = {field.upper() for field in Settings.__dataclass_fields__}
    variables = {f"SWARMLOG_{name}" for name in fields} | {f"SWARMLOG_{name.upper()}_FILE" for name in SECRET_FIELDS}
    process = {"SWARMLOG_BRAIN", "SWARMLOG_MODEL", "SWARMLOG_MAX_TOKENS", "SWARMLOG_CONCURRENCY"}
    process |= {"SWARMLOG_STREAMS_INSTANCE_ID"}
    for name, docs in rendered.items():
        for workload, container in containers(docs):
            env = environment(docs, container, tmp_path / name / workload["metadata"]["name"])
            assert set(env) <= variables | process, f"{name}: {sorted(set(env) - variables - process)}"
            settings = Settings.from_env(env)
            role = workload["metadata"]["labels"]["app.kubernetes.io/component"]
            if name == "default":
                assert settings.kafka_security_protocol == "PLAINTEXT" and settings.kafka_password is None
            else:
                assert settings.kafka_security_protocol == "SASL_SSL" and settings.kafka_ca_file is not None
                assert settings.kafka_password is not None and settings.kafka_username
                assert (settings.kafka_cert_file is not None) == (name == "secured")
                uses_redis = role == "streams" or role.startswith("agent-")
                assert (settings.redis_password is not None) == uses_redis, role
                assert (settings.redis_ca_file is not None) == (uses_redis and name == "secured"), role
                signs = role != "topics"  # every process but the topics Job, which writes no event
                assert (settings.signing_trust_file is not None) == signs, role
                assert (settings.signing_key_file is not None) == signs, role


def test_the_strimzi_topics_are_the_catalog(rendered: dict[str, list[dict[str, Any]]]) -> None:
    # ci/strimzi-values.yaml: 3 regions, replication factor 3, 128 inbox partitions.
    settings = Settings(regions=3, replication_factor=3, inbox_partitions=128)
    topics = by_kind(rendered["strimzi"], "KafkaTopic")
    assert set(topics) == {spec.name for spec in catalog(settings)}
    for spec in catalog(settings):
        topic = topics[spec.name]["spec"]
        assert topic["partitions"] == spec.partitions and topic["replicas"] == 3, spec.name
        assert topic["config"] == spec.configs(settings), spec.name


def test_each_kafka_user_has_the_grants_of_its_role(rendered: dict[str, list[dict[str, Any]]]) -> None:
    # ci/strimzi-values.yaml: 3 regions, and extraAcls that give agents what `swarmlog acl apply --ask-peers` does.
    granted = grants(Settings(regions=3), streams_app_id=worker_setting("app_id", {}), ask_peers=True)
    expected = {
        (
            g.role.value,
            STRIMZI_TYPES[g.resource_type],
            g.name,
            STRIMZI_PATTERNS[g.pattern],
            STRIMZI_OPERATIONS[g.operation],
        )
        for g in granted
    }
    users = by_kind(rendered["strimzi"], "KafkaUser")
    assert set(users) == {f"swarmlog-{role}" for role in Role}
    found = {
        (role.value, acl["resource"]["type"], acl["resource"]["name"], acl["resource"]["patternType"], operation)
        for role in Role
        for acl in users[f"swarmlog-{role}"]["spec"]["authorization"]["acls"]
        for operation in acl["operations"]
    }
    assert found == expected


def test_ids_regions_gpus_and_metrics_come_from_the_pods(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["secured"]
    sets = by_kind(docs, "StatefulSet")
    assert sets["swarmlog-coordinator"]["spec"]["replicas"] == 2  # one per region, its ordinal the region
    workloads = {workload["metadata"]["name"]: (workload, container) for workload, container in containers(docs)}
    _, coordinator = workloads["swarmlog-coordinator"]
    (index,) = [env for env in coordinator["env"] if env["name"] == "REGION_INDEX"]
    assert index["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.labels['apps.kubernetes.io/pod-index']"
    principal = next(env for env in coordinator["env"] if env["name"] == "SWARMLOG_SIGNING_PRINCIPAL")
    assert principal["value"] == "coordinator-region-$(REGION_INDEX)"  # a key per region, the pod's own picked
    (keys,) = [v for v in sets["swarmlog-coordinator"]["spec"]["template"]["spec"]["volumes"] if v["name"] == "signing"]
    assert [item["key"] for item in keys["secret"]["items"]] == ["coordinator-region-0.pem", "coordinator-region-1.pem"]
    _, agent = workloads["swarmlog-agent"]
    assert agent["args"][:2] == ["agent", "$(POD_NAME)"] and agent["resources"]["limits"]["nvidia.com/gpu"] == 1
    _, fleet = workloads["swarmlog-fleet"]
    concurrency = {
        name: env["value"]
        for name, env in (("agent", agent), ("fleet", fleet))
        for env in env["env"]
        if env["name"] == "SWARMLOG_CONCURRENCY"
    }
    assert concurrency == {"agent": "4", "fleet": "1"}  # the pool's capacity, else one task at a time
    assert fleet["args"][fleet["args"].index("--gpus") + 1] == "0,1,2,3,4,5,6,7"
    assert fleet["resources"]["limits"]["nvidia.com/gpu"] == 8
    _, streams = workloads["swarmlog-streams"]
    (instance,) = [env for env in streams["env"] if env["name"] == "SWARMLOG_STREAMS_INSTANCE_ID"]
    assert instance["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert sets["swarmlog-streams"]["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
    for name, (workload, _) in workloads.items():
        annotations = workload["spec"]["template"]["metadata"]["annotations"]
        scraped = name not in ("swarmlog-top", "swarmlog-topics")  # the top level and the Job serve no metrics
        assert (annotations.get("prometheus.io/scrape") == "true") == scraped, name
        assert not scraped or annotations["prometheus.io/port"] == "9100"


def artifact_stores(docs: list[dict[str, Any]]) -> dict[str, tuple[str, str | None, str | None]]:
    """Per workload: (its command, the claim its `artifacts` volume names, SWARMLOG_ARTIFACTS_DIR)."""
    found = {}
    for workload, container in containers(docs):
        volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"].get("volumes", [])}
        mounts = {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}
        env = {e["name"]: e.get("value") for e in container.get("env", [])}
        claim = volumes["artifacts"]["persistentVolumeClaim"]["claimName"] if "artifacts" in volumes else None
        assert mounts.get("artifacts") == (claim and "/artifacts")
        found[workload["metadata"]["name"]] = (container["args"][0], claim, env.get("SWARMLOG_ARTIFACTS_DIR"))
    return found


def test_every_agent_pod_mounts_the_one_shared_artifact_store(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for name, docs in rendered.items():
        (claim,) = by_kind(docs, "PersistentVolumeClaim").values()
        assert claim["metadata"]["name"] == "swarmlog-artifacts" and claim["spec"]["accessModes"] == ["ReadWriteMany"]
        assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
        stores = artifact_stores(docs).values()
        commands = {command for command, _, _ in stores}
        assert commands & {"agent", "fleet"} and "coordinator" in commands, name
        for command, claim_name, directory in stores:
            agent = command in ("agent", "fleet")
            assert (claim_name, directory) == (("swarmlog-artifacts", "/artifacts") if agent else (None, None)), name
    existing = helm("template", "swarmlog", str(CHART), "--set", "artifacts.existingClaim=team-nfs")
    assert existing.returncode == 0, existing.stderr
    docs = [doc for doc in yaml.safe_load_all(existing.stdout) if doc]
    assert by_kind(docs, "PersistentVolumeClaim") == {}  # the operator's claim, not one of the chart's
    assert artifact_stores(docs)["swarmlog-agent"] == ("agent", "team-nfs", "/artifacts")
    one_pod = ["artifacts.enabled=false", "agents.pools[0].name=a", "agents.pools[0].replicas=1"]
    alone = helm("template", "swarmlog", str(CHART), *[arg for value in one_pod for arg in ("--set", value)])
    assert alone.returncode == 0, alone.stderr  # one agent pod may keep its own store
    docs = [doc for doc in yaml.safe_load_all(alone.stdout) if doc]
    assert artifact_stores(docs)["swarmlog-a"] == ("agent", None, None)


def test_the_worked_example_of_the_docs_renders_valid_manifests(
    check: subprocess.CompletedProcess[str], tmp_path: Path
) -> None:
    assert check.returncode == 0, check.stdout + check.stderr
    operations = (ROOT / "docs" / "operations.md").read_text()
    example = operations.split("cat > my-values.yaml <<'VALUES'\n", 1)[1].split("\nVALUES\n", 1)[0]
    (tmp_path / "my-values.yaml").write_text(example)
    result = helm("template", "swarmlog", str(CHART), "-f", str(tmp_path / "my-values.yaml"))
    assert result.returncode == 0, result.stderr
    assert validate(result.stdout).returncode == 0
    sets = by_kind([doc for doc in yaml.safe_load_all(result.stdout) if doc], "StatefulSet")
    assert sets["swarmlog-coordinator"]["spec"]["replicas"] == 2
    assert {name: s["spec"]["replicas"] for name, s in sets.items() if "gpu" in name} == {
        "swarmlog-gpu-a": 4,
        "swarmlog-gpu-b": 4,
    }
