"""Notes: a trivial kind of workload, kept as a ConfigMap, declared entirely in this package.

It is the proof that a kind is one package behind the engine: its declaration (``kind``),
its records (``models``), its service (``service``) and its routes (``routes``) use the
engine's public parts and nothing else of the service's kinds, and the app runs it with one
registration line (``create_app(config, kinds=[*KINDS, NoteKind])``).
"""
