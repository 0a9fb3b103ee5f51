"""The workload engine: operations with leases and resumption, events with replay,
deadlines and fast failure, for every kind of workload the service runs.

``Engine`` queues operations; ``OperationRunner`` runs them through the kind's steps
(``WorkloadKind``), which report through one ``Reporter``. Kinds live in ``app.workloads``.
"""
