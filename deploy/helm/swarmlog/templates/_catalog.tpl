{{/* The topic catalog (swarmlog/topics.py `catalog`, what `swarmlog topics list` prints), for Strimzi's
KafkaTopics and the roles' ACLs. partitions: default (swarm.defaultPartitions), regions, inbox, or a number;
retentionDays -1: forever; writers: the roles that write it. tests/test_chart.py checks it against the code. */}}
{{- define "swarmlog.catalog" -}}
- {name: swarm.missions, partitions: default, cleanup: delete, retentionDays: 30, writers: [operator, top]}
- {name: swarm.coordinator.journal, partitions: regions, cleanup: delete, retentionDays: -1, writers: [coordinator]}
- {name: swarm.coordinators, partitions: 1, cleanup: delete, retentionDays: 1, writers: [coordinator]}
- {name: swarm.agents.inbox, partitions: inbox, cleanup: delete, retentionDays: 7, writers: [coordinator, agent]}
- {name: swarm.agents.slots, partitions: 1, cleanup: compact, writers: [agent, coordinator]}
- {name: swarm.tasks.events, partitions: default, cleanup: delete, retentionDays: 30, writers: [agent]}
- {name: swarm.agents.heartbeats, partitions: default, cleanup: delete, retentionDays: 1, writers: [agent]}
- {name: swarm.agents.registry, partitions: default, cleanup: compact, writers: [agent, streams]}
- {name: swarm.memory.experiences, partitions: default, cleanup: delete, retentionDays: 30, writers: [agent]}
- {name: swarm.consensus.votes, partitions: default, cleanup: delete, retentionDays: 30, writers: [agent]}
- {name: swarm.waits, partitions: default, cleanup: delete, retentionDays: 30, writers: [agent]}
- {name: swarm.usage, partitions: default, cleanup: delete, retentionDays: 30, writers: [agent]}
- {name: swarm.control, partitions: default, cleanup: delete, retentionDays: 7, writers: [streams, operator]}
- {name: swarm.alerts, partitions: default, cleanup: delete, retentionDays: 30, writers: [streams]}
- {name: swarm.groundtruth, partitions: 1, cleanup: compact, writers: [operator, coordinator]}
- {name: swarm.deadletter, partitions: default, cleanup: delete, retentionDays: 30, writers: [coordinator, top, streams, agent, operator]}
- {name: swarm.top.journal, partitions: 1, cleanup: delete, retentionDays: -1, writers: [top]}
{{- end -}}
