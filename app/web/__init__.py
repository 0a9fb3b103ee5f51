"""HTTP-layer helpers shared by the blueprints: authentication, errors, JSON bodies."""
