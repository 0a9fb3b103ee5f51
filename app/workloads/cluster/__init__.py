"""Users' compute clusters (Dask, Ray, Spark), run by the operators a platform already has."""
