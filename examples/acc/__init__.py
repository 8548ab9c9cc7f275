"""A stand-in accelerator library: its first initialisation draws one number."""
