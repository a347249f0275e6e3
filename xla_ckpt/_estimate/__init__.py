"""What a step will cost before it runs: ``estimate`` (one step on the meta device), ``estimate_layers``
(a deep model from short ones), ``fit`` (the config per chip and budget), with the chips, attention kernels
and Hugging Face configs they model.
"""
