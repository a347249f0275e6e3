"""Saved-tensor hooks (one pack/unpack pair for every feature), parameters by reference, the corrected
linear, tags, and the ``saved_activations`` report.
"""
