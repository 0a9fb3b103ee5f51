"""The kinds of workload the engine runs, one package each (see ``app.engine.kind``)."""
