"""Corrected ops (autograd Functions): a linear and a layer norm whose backward keeps what CPU keeps
(the weight itself, the input), where XLA's own kernels would save a transposed, cast or normalized copy.
"""
