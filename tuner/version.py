"""The version of tuner, recorded in every fingerprint."""

__version__ = "0.2.0"
