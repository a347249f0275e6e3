"""The command line (``python -m xla_ckpt``): explain a policy on an example model, fit a model to a chip."""
