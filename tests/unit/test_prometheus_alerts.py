"""``conf/prometheus-alerts.yml``: every rule is well formed, names metrics the daemons export, and
(with Prometheus' ``promtool`` installed: Debian's ``prometheus`` package) loads and fires on examples."""

from __future__ import annotations

import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
import yaml

RULES = Path(__file__).resolve().parents[2] / "conf" / "prometheus-alerts.yml"
WANTED = {
    "RocketpyConsumerLagSeconds",
    "RocketpyConsumerLagGrowing",
    "RocketpyDeadLetters",
    "RocketpyBrokerDown",
    "RocketpyDiskFilling",
    "RocketpyReplicationLag",
}
#: Families the broker and NameServer export (broker/metrics.py, nameserver/metrics.py) and ``up``.
EXPORTED = {
    "rocketpy_consumer_lag_latency_seconds",
    "rocketpy_consumer_lag",
    "rocketpy_put_messages_total",
    "rocketpy_disk_used_ratio",
    "rocketpy_ha_slave_lag_bytes",
    "rocketpy_ha_connected",
    "up",
}


def _rules() -> list[dict[str, object]]:
    doc = yaml.safe_load(RULES.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def test_every_rule_is_complete_and_names_exported_metrics() -> None:
    rules = _rules()
    assert WANTED <= {r["alert"] for r in rules}
    for rule in rules:
        assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]  # type: ignore[index]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]  # type: ignore[index]
        names = set(re.findall(r"\b(rocketpy_[a-z_]+|up)\b", str(rule["expr"])))
        assert names and names <= EXPORTED, (rule["alert"], names - EXPORTED)


PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool is not installed (Debian: apt-get install prometheus; .ci/run installs it as root)",
)


@needs_promtool
def test_promtool_loads_the_rules() -> None:
    out = subprocess.run([PROMTOOL or "", "check", "rules", str(RULES)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


UNIT_TESTS = """
rule_files: [{rules}]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'rocketpy_consumer_lag_latency_seconds{{group="g1",topic="T",queue_id="0",instance="b:1"}}'
        values: '400+60x10'
      - series: 'rocketpy_consumer_lag_latency_seconds{{group="g2",topic="T",queue_id="0",instance="b:1"}}'
        values: '0x10'
      - series: 'rocketpy_put_messages_total{{topic="%DLQ%g1",instance="b:1"}}'
        values: '0 0 0 1 2 2 2 2 2 2 2'
      - series: 'up{{job="rocketpy-broker",instance="b:1"}}'
        values: '1 1 0 0 0 0 0 0 0 0 0'
      - series: 'rocketpy_disk_used_ratio{{instance="b:1"}}'
        values: '0.8x10'
      - series: 'rocketpy_ha_slave_lag_bytes{{instance="b:1",slave_id="1",addr="s:1"}}'
        values: '100000000x10'
    alert_rule_test:
      - eval_time: 6m
        alertname: RocketpyConsumerLagSeconds
        exp_alerts:
          - exp_labels: {{severity: warning, group: g1, topic: T}}
            exp_annotations:
              summary: "Group g1 is 12m 40s behind on T"
              description: >-
                The oldest message group g1 has not consumed in topic T has waited more than 5 minutes.
                Check the group's consumers (mqadmin consumerConnection -g, consumerStatus -g) and its
                progress (mqadmin consumerProgress -g).
      - eval_time: 6m
        alertname: RocketpyConsumerLagSecondsCritical
        exp_alerts: []
      - eval_time: 5m
        alertname: RocketpyDeadLetters
        exp_alerts:
          - exp_labels: {{severity: warning, topic: "%DLQ%g1"}}
            exp_annotations:
              summary: "2 message(s) went to %DLQ%g1 in the last 15 minutes"
              description: >-
                Messages exhausted their retries (or were dead-lettered by POP). Read them with
                `mqadmin queryMsgByKey -t %DLQ%g1` or the dashboard's Dead letters page, fix the
                consumer, then put them back with `mqadmin resendDlq -g GROUP`.
      - eval_time: 4m
        alertname: RocketpyBrokerDown
        exp_alerts:
          - exp_labels: {{severity: critical, job: rocketpy-broker, instance: "b:1"}}
            exp_annotations:
              summary: "rocketpy-broker b:1 is down"
              description: >-
                Prometheus cannot scrape b:1 for a minute: the daemon stopped or its metricsPort is
                unreachable. With a slave, consumers read its queues meanwhile; sends go to the
                other brokers.
      - eval_time: 6m
        alertname: RocketpyDiskRefusingWrites
        exp_alerts: []
      - eval_time: 6m
        alertname: RocketpyReplicationLag
        exp_alerts:
          - exp_labels: {{severity: warning, instance: "b:1", slave_id: "1"}}
            exp_annotations:
              summary: "Slave 1 of b:1 is 95.37MiB behind"
              description: >-
                The slave has not acknowledged more than 64 MiB of its master's commitlog for 5
                minutes; a master lost now would take those messages with it (ASYNC_MASTER). See
                mqadmin haStatus.
"""


@needs_promtool
def test_the_rules_fire_on_examples(tmp_path: Path) -> None:
    tests = tmp_path / "alerts_test.yml"
    tests.write_text(textwrap.dedent(UNIT_TESTS).format(rules=RULES))
    out = subprocess.run([PROMTOOL or "", "test", "rules", str(tests)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
