"""The bottom layer: torch-version differences, torch_xla details, module-name stacks, one warn-once, the errors.

Imports nothing else of the library.
"""
