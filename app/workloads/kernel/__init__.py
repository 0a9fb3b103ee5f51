"""Remote Jupyter kernels as a kind of workload: a pod per kernel in its user's lab namespace."""
