"""The record of a region's forward, op position by op position, that the engine and every lowering share:
what a policy sees and answers (``OpCall``, ``Decision``, with the one check of its answer), what each op
was and what its replay must match (``Record``), which outputs backward reads (liveness), stand-ins' specs,
and the state a recompute must put back or wait on (RNG draws, autocast, the gradient fence).
"""
