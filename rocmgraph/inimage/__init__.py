"""Scripts that run inside the image being built, on its own Python: the standard
library only (tests/test_layers.py holds them to that). A stage mounts each one
into its RUN line; the keys cover them by content, like the recipes.
"""
