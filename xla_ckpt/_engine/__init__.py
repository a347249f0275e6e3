"""The eager / lazy engine: a region's state, its forward, what it keeps, and its recompute.
"""
