"""Simulated operators: each turns one kind of custom object into the objects its real operator
creates (pods and Services; an Ingress for Gafaelfawr's), with the same names and labels, so
clients find them as they would in a cluster. They act only once the kind's
CustomResourceDefinition is served. Dask's is not here: the stack runs the real dask-kubernetes
operator (``devstack.dask_operator``)."""

from __future__ import annotations

from .base import Admit, ListObjects, Operator, OperatorSimulation
from .gafaelfawr import GafaelfawrIngressOperator
from .ray import RayOperator
from .spark import SparkConnectOperator

__all__ = ["OPERATORS", "Admit", "ListObjects", "Operator", "OperatorSimulation"]

OPERATORS: tuple[type[Operator], ...] = (
    RayOperator,
    SparkConnectOperator,
    GafaelfawrIngressOperator,
)
