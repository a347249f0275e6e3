"""The policy under ``torch.compile``: torch's selective-checkpoint marks, and the fenced partition.
"""
