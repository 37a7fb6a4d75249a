"""The version of tuner, recorded in every fingerprint."""

__version__ = "0.3.0"
