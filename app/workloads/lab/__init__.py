"""Labs: a user's JupyterLab pod, with its namespace and everything in it."""

from app.workloads.lab.kind import LabKind

__all__ = ["LabKind"]
