"""Builders the kinds share: pure functions from a spec and the configuration to Kubernetes
objects and their pieces (names, labels, volumes, the environment, a user's pod's security).

No I/O happens here; objects are plain dicts in the JSON shape the Kubernetes API accepts. A
kind's own objects are built in its package (``app/workloads/<kind>/builders.py``).
"""
