"""Lab images: what the registry holds and what the form lists. Tags are read by the pure
parser in ``app.models.image_tags``.
"""
