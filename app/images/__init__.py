"""Lab images: what the registry holds, how tags read to people, and what the form lists.

Kept free of imports so that the pure tag parser (``app.images.tags``) can be used, and
tested, without pulling in network or Flask code.
"""
