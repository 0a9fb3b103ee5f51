"""The workload engine: operations with leases and resumption, events with replay,
deadlines and fast failure, for every kind of workload the service runs.

``Engine`` queues operations; ``OperationRunner`` runs them through the kind's steps
(``WorkloadKind``), which report through one ``Reporter``. Everything outside reads the
records through ``WorkloadReads`` (``Engine.workloads``), and a kind's service answers its
reads, deletes and events through ``WorkloadService``. Kinds live in ``app.workloads``.
"""
