"""What users call: wrapping, ``apply``, configs and presets, Hugging Face, scan, ``tag``.
"""
