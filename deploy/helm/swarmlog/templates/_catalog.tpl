{{/* The topic catalog (swarmlog/topics.py `catalog`, what `swarmlog topics list` prints), for Strimzi's
KafkaTopics and the roles' ACLs. partitions: default (swarm.defaultPartitions), regions, inbox, or a number;
retentionDays -1: forever. tests/test_chart.py checks it against the code. */}}
{{- define "swarmlog.catalog" -}}
- {name: swarm.missions, partitions: default, cleanup: delete, retentionDays: 30}
- {name: swarm.coordinator.journal, partitions: regions, cleanup: delete, retentionDays: -1}
- {name: swarm.coordinators, partitions: 1, cleanup: delete, retentionDays: 1}
- {name: swarm.agents.inbox, partitions: inbox, cleanup: delete, retentionDays: 7}
- {name: swarm.agents.slots, partitions: 1, cleanup: compact}
- {name: swarm.tasks.events, partitions: default, cleanup: delete, retentionDays: 30}
- {name: swarm.agents.heartbeats, partitions: default, cleanup: delete, retentionDays: 1}
- {name: swarm.agents.registry, partitions: default, cleanup: compact}
- {name: swarm.memory.experiences, partitions: default, cleanup: delete, retentionDays: 30}
- {name: swarm.consensus.votes, partitions: default, cleanup: delete, retentionDays: 30}
- {name: swarm.waits, partitions: default, cleanup: delete, retentionDays: 30}
- {name: swarm.usage, partitions: default, cleanup: delete, retentionDays: 30}
- {name: swarm.control, partitions: default, cleanup: delete, retentionDays: 7}
- {name: swarm.alerts, partitions: default, cleanup: delete, retentionDays: 30}
- {name: swarm.groundtruth, partitions: 1, cleanup: compact}
- {name: swarm.deadletter, partitions: default, cleanup: delete, retentionDays: 30}
- {name: swarm.top.journal, partitions: 1, cleanup: delete, retentionDays: -1}
{{- end -}}

{{/* Each role's topics (swarmlog/acl.py WRITES and READS; docs/operations.md, "Roles and ACLs"). The ACLs of
templates/strimzi.yaml add the per-region, prefix and catalog-wide grants of swarmlog.acl.grants; tests/test_chart.py
checks the rendered KafkaUsers against it. */}}
{{- define "swarmlog.roleTopics" -}}
coordinator:
  writes: [swarm.coordinator.journal, swarm.agents.inbox, swarm.agents.slots, swarm.coordinators, swarm.deadletter]
  reads: [swarm.missions, swarm.tasks.events, swarm.consensus.votes, swarm.agents.registry, swarm.control, swarm.alerts, swarm.agents.slots, swarm.coordinator.journal, swarm.coordinators]
top:
  writes: [swarm.top.journal, swarm.missions, swarm.coordinators]
  reads: [swarm.missions, swarm.coordinator.journal, swarm.coordinators, swarm.top.journal]
agent:
  writes: [swarm.tasks.events, swarm.agents.heartbeats, swarm.agents.registry, swarm.memory.experiences, swarm.consensus.votes, swarm.waits, swarm.usage, swarm.agents.slots, swarm.deadletter]
  reads: [swarm.agents.inbox, swarm.control, swarm.agents.registry, swarm.tasks.events, swarm.consensus.votes, swarm.agents.slots, swarm.groundtruth]
streams:
  writes: [swarm.agents.registry, swarm.control, swarm.alerts, swarm.deadletter]
  reads: [swarm.agents.registry, swarm.agents.heartbeats, swarm.waits, swarm.alerts, swarm.usage, swarm.control, swarm.memory.experiences]
producer:
  writes: [swarm.missions]
  reads: [swarm.coordinators]
operator:
  writes: []
  reads: []
{{- end -}}
