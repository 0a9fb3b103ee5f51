"""Remote kernels: Jupyter kernels that run in pods the service starts.

- ``launch`` is the kernel pod's start-up;
- ``kernelspec`` writes the kernelspecs that choose the service's kernel provisioner
  (``python -m labspawner.kernels install``);
- ``provisioner`` is that provisioner, :class:`~.provisioner.LabKernelProvisioner`, which
  Jupyter finds by the ``jupyter_client.kernel_provisioners`` entry point ``lab-spawner``
  (it needs ``jupyter_client``: the package's ``kernels`` extra);
- ``client`` holds the service's kernel calls, reached as ``LabSpawnerClient.kernels``.

Nothing is imported here: the kernel pod runs ``python -m labspawner.kernels.launch``, and a
package that imported its modules would import that script before running it.
"""
