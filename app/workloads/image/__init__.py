"""Images on their way into service: each digest validated in pods of its own first."""
