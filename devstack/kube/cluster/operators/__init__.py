"""Simulated operators: each turns one kind of custom object into the pods and Services its
real operator creates, with the same names and labels, so clients find them as they would in
a cluster. They act only once the kind's CustomResourceDefinition is served."""

from __future__ import annotations

from .base import Admit, ListObjects, OperatorSimulation
from .dask import DaskOperator
from .ray import RayOperator
from .spark import SparkConnectOperator

__all__ = ["OPERATORS", "Admit", "ListObjects", "OperatorSimulation"]

OPERATORS: tuple[type[OperatorSimulation], ...] = (DaskOperator, RayOperator, SparkConnectOperator)
