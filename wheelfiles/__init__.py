"""Prebuilt wheels: resolved against a flat index, fetched by sha256 into a store."""
