"""What the engine and every lowering share: ``OpCall`` and ``Decision`` (with the one check of a policy's
answer), the per-op ``Record``, the region's dataflow (liveness) and the RNG / autocast / fence state.
"""
