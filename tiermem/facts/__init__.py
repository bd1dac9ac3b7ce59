"""The Core tier's fact store and the injection text built from it."""
