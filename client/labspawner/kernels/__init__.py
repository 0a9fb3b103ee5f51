"""Remote kernels: Jupyter kernels that run in pods the service starts.

``launch`` is the kernel pod's start-up; ``kernelspec`` writes the kernelspecs that choose
the service's kernel provisioner (``python -m labspawner.kernels install``).
"""
