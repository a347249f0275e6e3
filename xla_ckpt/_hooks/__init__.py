"""Saved-tensor hooks (one pack/unpack pair for every feature), parameters by reference, tags, and the
``saved_activations`` report.
"""
