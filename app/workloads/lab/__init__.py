"""Labs: a user's JupyterLab pod, with its namespace and everything in it."""
